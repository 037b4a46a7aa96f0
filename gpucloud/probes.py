"""/healthz, /readyz and /metrics: for load balancers, orchestrators and Prometheus."""

from __future__ import annotations

import logging
import os

from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest, multiprocess
from prometheus_client import REGISTRY as DEFAULT_REGISTRY

from gpucloud.celery import app as celery_app

log = logging.getLogger(__name__)


def healthz(request: HttpRequest) -> HttpResponse:
    """The process is up and serving."""
    return JsonResponse({"status": "ok"})


def _check_database() -> str:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except Exception as exc:  # any driver error means "not ready"
        return f"unreachable: {exc.__class__.__name__}"
    return "ok"


def _check_broker() -> str:
    try:
        with celery_app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=2)
    except Exception as exc:  # kombu raises transport-specific errors
        return f"unreachable: {exc.__class__.__name__}"
    return "ok"


def readyz(request: HttpRequest) -> HttpResponse:
    """Ready to serve: the database and the task broker answer."""
    checks = {"database": _check_database(), "broker": _check_broker()}
    ready = all(value == "ok" for value in checks.values())
    if not ready:
        log.warning("not ready", extra={"checks": checks})
    return JsonResponse(
        {"status": "ok" if ready else "unavailable", "checks": checks}, status=200 if ready else 503
    )


def metrics(request: HttpRequest) -> HttpResponse:
    """Prometheus metrics; with PROMETHEUS_MULTIPROC_DIR set, those of every gpucloud process on the host."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
    else:
        registry = DEFAULT_REGISTRY
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
