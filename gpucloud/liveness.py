"""`GET /healthz` for the processes that serve no HTTP of their own (`gpucloud scheduler`, `gpucloud
tenant-watcher`), for the kubelet's liveness probe (deploy/kubernetes).

A process's main loop beats a heartbeat each time round. `/healthz` answers 200 while the last beat is
younger than `max_age`, and 503 once it is not, so the kubelet restarts a process that hangs (a call that
never returns, a deadlock) and not only one that died. Before its first beat a process is starting or
waiting for its turn (a standby scheduler waits for the leader's lock, as long as the leader lives): that is
alive, and answered 200.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Heartbeat:
    """When the process's loop last came round; one per process (`HEARTBEAT`)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self.max_age = float("inf")  # set by `serve`; with nobody asking, a beat costs one clock read
        self.last: float | None = None

    def beat(self) -> None:
        self.last = self.clock()

    def report(self) -> tuple[bool, dict[str, Any]]:
        """(alive, what /healthz says)."""
        if self.last is None:
            return True, {"alive": True, "beat": "none yet: starting, or waiting for its turn"}
        age = round(self.clock() - self.last, 3)
        return age <= self.max_age, {
            "alive": age <= self.max_age,
            "seconds_since_beat": age,
            "max": self.max_age,
        }


HEARTBEAT = Heartbeat()


def beat() -> None:
    """The process's loop came round."""
    HEARTBEAT.beat()


class _Handler(BaseHTTPRequestHandler):
    heartbeat: Heartbeat = HEARTBEAT

    def do_GET(self) -> None:
        if self.path.split("?")[0] != "/healthz":
            self._send(404, {"error": "this port serves GET /healthz only"})
            return
        alive, body = self.heartbeat.report()
        self._send(200 if alive else 503, body)

    def _send(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: a probe every few seconds is no news."""


def serve(
    port: int, max_age: float, *, host: str = "0.0.0.0", heartbeat: Heartbeat = HEARTBEAT
) -> ThreadingHTTPServer:
    """Answer `GET /healthz` on `host:port` from a daemon thread: stale after `max_age` s without a beat."""
    heartbeat.max_age = max_age
    handler = type("Handler", (_Handler,), {"heartbeat": heartbeat})
    server = ThreadingHTTPServer((host, port), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="liveness", daemon=True).start()
    return server
