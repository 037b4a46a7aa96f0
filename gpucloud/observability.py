"""Request ids, structured-log context and the Prometheus metrics every process shares."""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from django.http import HttpRequest, HttpResponse
from prometheus_client import Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily


@dataclass(frozen=True)
class RequestContext:
    """Who is asking and from where; services copy it into audit rows."""

    request_id: str
    source_ip: str = ""
    user_agent: str = ""


_context: ContextVar[RequestContext | None] = ContextVar("gpucloud_request_context", default=None)
_REQUEST_ID_OK = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


def current_context() -> RequestContext:
    return _context.get() or RequestContext(request_id="")


def set_context(context: RequestContext | None) -> object:
    return _context.set(context)


def reset_context(token: object) -> None:
    _context.reset(token)  # type: ignore[arg-type]


HTTP_REQUESTS = Counter("gpucloud_http_requests_total", "HTTP requests served", ["method", "status", "view"])
HTTP_DURATION = Histogram("gpucloud_http_request_duration_seconds", "HTTP request duration", ["method"])
RECONCILE_RUNS = Counter(
    "gpucloud_reconcile_runs_total", "Reconcile passes over a host cluster", ["driver", "outcome"]
)
RECONCILE_DURATION = Histogram(
    "gpucloud_reconcile_duration_seconds", "Duration of one reconcile pass", ["driver"]
)
RECONCILE_WRITES = Counter("gpucloud_reconcile_writes_total", "Writes made by reconcile passes", ["target"])
TASK_FAILURES = Counter("gpucloud_task_failures_total", "Celery tasks that raised", ["task"])
# Reconcile lag is now minus this: how long the host cluster has gone without a pass that succeeded.
RECONCILE_LAST_SUCCESS = Gauge(
    "gpucloud_reconcile_last_success_timestamp_seconds",
    "When a reconcile pass over the host cluster last succeeded",
    ["host_cluster"],
    multiprocess_mode="max",
)


class QueueDepth:
    """Messages waiting in each Celery queue, read from the broker when Prometheus scrapes a worker."""

    NAME = "gpucloud_queue_depth"

    def __init__(self, app: Any, queues: list[str]) -> None:
        self.app, self.queues = app, queues

    def describe(self) -> list[GaugeMetricFamily]:
        return [GaugeMetricFamily(self.NAME, "Messages waiting in a Celery queue", labels=["queue"])]

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = self.describe()[0]
        try:
            with self.app.connection_for_read() as conn:
                for queue in self.queues:
                    family.add_metric([queue], self._depth(conn.default_channel, queue))
        except Exception as exc:  # a scrape must not fail because the broker is away; the gauge goes missing
            logging.getLogger(__name__).warning("queue depth unavailable: %s", exc)
            return
        yield family

    @staticmethod
    def _depth(channel: Any, queue: str) -> int:
        try:
            return int(channel.queue_declare(queue, passive=True).message_count)
        except Exception:  # kombu's transports say "no such queue" for one that is empty and unused
            return 0


class RequestContextMiddleware:
    """Gives every request an id (kept from `X-Request-ID` when sane), and counts it."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        incoming = request.headers.get("X-Request-ID", "")
        request_id = incoming if _REQUEST_ID_OK.match(incoming) else uuid.uuid4().hex
        context = RequestContext(
            request_id=request_id,
            source_ip=request.META.get("REMOTE_ADDR", ""),
            user_agent=request.headers.get("User-Agent", "")[:300],
        )
        token = set_context(context)
        started = time.perf_counter()
        try:
            response = self.get_response(request)
        finally:
            reset_context(token)
        match = getattr(request, "resolver_match", None)
        view = match.view_name if match else "unmatched"
        HTTP_REQUESTS.labels(request.method, str(response.status_code), view).inc()
        HTTP_DURATION.labels(request.method).observe(time.perf_counter() - started)
        response["X-Request-ID"] = request_id
        return response


class ContextFilter(logging.Filter):
    """Adds the current request id to every log record."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "request_id"):
            record.request_id = current_context().request_id
        return True
