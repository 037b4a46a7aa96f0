"""Celery tasks. Each takes ids, re-reads state, and is safe to run twice.

One decorator gives every task the same contract: an explicit name, late acknowledgement (a worker killed
mid-task leaves the message to be redelivered), no result backend, and bounded retries with backoff and
jitter for temporary errors only. Anything else is a bug or a permanent error and is not retried.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta
from typing import Any, TypeVar

from celery.signals import task_failure
from django.conf import settings
from django.db import DatabaseError
from django.utils import timezone

from gpucloud import celery as names
from gpucloud.celery import app, enqueue
from gpucloud.observability import TASK_FAILURES
from tenants.models import Tenant
from workers import reconcile, simulator
from workers.drivers.base import TemporaryDriverError
from workers.locks import LockBusy

log = logging.getLogger(__name__)
TEMPORARY_ERRORS = (TemporaryDriverError, LockBusy, DatabaseError, ConnectionError, TimeoutError)
F = TypeVar("F", bound=Callable[..., Any])
# After a long pause (beat stopped), the periodic task simulates at most this much of the missed time.
CATCH_UP = timedelta(hours=1)


def task(name: str, *, max_retries: int = 8) -> Callable[[F], Any]:
    def wrap(fn: F) -> Any:
        return app.task(
            name=name,
            acks_late=True,
            ignore_result=True,
            autoretry_for=TEMPORARY_ERRORS,
            max_retries=max_retries,
            retry_backoff=1,
            retry_backoff_max=60,
            retry_jitter=True,
        )(fn)

    return wrap


@task(names.RECONCILE_TENANT)
def reconcile_tenant(tenant_id: int) -> None:
    """The on-change shortcut: reconcile one tenant now, and again shortly while it is in transit."""
    tenant = Tenant.objects.select_related("cluster__host_cluster").filter(pk=tenant_id).first()
    if tenant is None or tenant.state == Tenant.State.DELETED:
        return
    outcome = reconcile.reconcile_host_cluster(tenant.cluster.host_cluster, [tenant_id])
    if tenant_id in outcome.transitional:
        enqueue(names.RECONCILE_TENANT, tenant_id, countdown=settings.REQUEUE_DELAY)


@task(names.RECONCILE_ALL, max_retries=2)
def reconcile_all() -> None:
    """The periodic, level-triggered pass over every host cluster."""
    for outcome in reconcile.reconcile_all().values():
        for tenant_id in outcome.transitional:
            enqueue(names.RECONCILE_TENANT, tenant_id, countdown=settings.REQUEUE_DELAY)


@task(names.AUDIT_STUCK, max_retries=0)
def report_stuck_tenants() -> None:
    """The auditor: tenants stuck in a transitional state past their deadline are logged loudly."""
    for tenant in reconcile.stuck_tenants(settings.STUCK_AFTER):
        log.error(
            "tenant is stuck",
            extra={"tenant": tenant.slug, "state": tenant.state, "since": tenant.updated_at.isoformat()},
        )


@task(names.SIMULATE_WORKLOADS, max_retries=2)
def simulate_workloads() -> None:
    """Advance the simulated fleet's workloads to now; minutes already simulated are skipped (safe twice)."""
    if not settings.SIM_WORKLOADS:
        return
    now = timezone.now()
    for host_cluster in simulator.simulated_host_clusters():
        summary = simulator.advance(host_cluster, until=now, seed=settings.SIM_SEED, catch_up=CATCH_UP)
        log.info("simulated workloads", extra={"host_cluster": host_cluster.name, **vars(summary)})


@task_failure.connect
def _count_failure(sender: Any = None, **_: Any) -> None:
    TASK_FAILURES.labels(getattr(sender, "name", "unknown")).inc()
