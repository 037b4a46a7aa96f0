"""gunicorn's configuration for `gpucloud web`, from the environment (docs/configuration.md).

gthread workers (each serves GPUCLOUD_WEB_THREADS requests at once), one JSON line per request on standard
output, the server's own log as JSON on standard error, and a graceful shutdown: on SIGTERM gunicorn stops
accepting, lets requests in flight finish for up to GPUCLOUD_WEB_GRACEFUL_TIMEOUT seconds, then exits.
"""

from __future__ import annotations

import os
from typing import Any

from gunicorn.glogging import Logger
from prometheus_client import CollectorRegistry, multiprocess, start_http_server
from pythonjsonlogger.json import JsonFormatter

from gpucloud.env import env_int, env_str

wsgi_app = "gpucloud.wsgi:application"
worker_class = "gthread"
workers = env_int("GPUCLOUD_WEB_WORKERS", 2, minimum=1)
threads = env_int("GPUCLOUD_WEB_THREADS", 4, minimum=1)
timeout = env_int("GPUCLOUD_WEB_TIMEOUT", 60, minimum=1)
graceful_timeout = env_int("GPUCLOUD_WEB_GRACEFUL_TIMEOUT", 25, minimum=0)
keepalive = 5
# Heartbeat files: on a read-only root file system point this at a writable emptyDir (the image uses /tmp).
worker_tmp_dir = env_str("GPUCLOUD_WEB_TMP_DIR") or None
# Proxies whose X-Forwarded-* gunicorn believes (Django reads X-Forwarded-Proto itself, see settings).
forwarded_allow_ips = env_str("GPUCLOUD_FORWARDED_ALLOW_IPS", "127.0.0.1")
accesslog = "-"
errorlog = "-"
logger_class = "gpucloud.gunicorn_conf.JsonLogger"

FORMATTER = JsonFormatter(
    "%(asctime)s %(levelname)s %(name)s %(message)s",
    rename_fields={"asctime": "time", "levelname": "level", "name": "logger"},
)


class JsonLogger(Logger):  # type: ignore[misc]  # gunicorn ships no type information
    """gunicorn's logger, writing JSON: one object per request with its fields, not a formatted line."""

    def setup(self, cfg: Any) -> None:
        super().setup(cfg)
        for log in (self.error_log, self.access_log):
            for handler in log.handlers:
                handler.setFormatter(FORMATTER)

    def access(self, resp: Any, req: Any, environ: dict[str, Any], request_time: Any) -> None:
        atoms = self.atoms(resp, req, environ, request_time)
        self.access_log.info(
            "request",
            extra={
                "remote": atoms["h"],
                "method": atoms["m"],
                "path": atoms["U"],
                "query": atoms["q"],
                "status": resp.status_code,
                "bytes": atoms["B"],
                "duration_ms": round(request_time.total_seconds() * 1000, 2),
                "request_id": atoms["{x-request-id}o"],
                "user_agent": atoms["a"],
            },
        )


def child_exit(server: Any, worker: Any) -> None:
    """A worker's live gauges leave /metrics with it (its counters stay summed in)."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        multiprocess.mark_process_dead(worker.pid)


def when_ready(server: Any) -> None:
    """The master serves every worker's metrics on GPUCLOUD_METRICS_PORT, for Prometheus to scrape.

    A port of its own, not /metrics on the web port: a scraper asks by pod address, which ALLOWED_HOSTS
    rightly refuses, and metrics need not go through the Ingress.
    """
    port = env_int("GPUCLOUD_METRICS_PORT", 9808, minimum=0)
    if port and os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        start_http_server(port, registry=registry)
