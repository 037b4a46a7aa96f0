"""The extender's HTTP server: ``POST /scheduler/v1/<host-cluster>/{filter,prioritize}``, ``GET /healthz``.

With mutual TLS the kubelet's probes (which hold no client certificate) cannot reach that ``/healthz``:
:class:`HealthServer` answers ``GET /healthz`` alone, in plain HTTP, on a port of its own (``--health-bind``).

A plain threaded HTTP/1.1 server (persistent connections, as kube-scheduler's Go client keeps them), no Django
in the request path: a call costs the JSON and the engine, not a middleware stack. Authentication and the
lookup of a host cluster's :class:`Extender` are given by the caller (``authorize``, ``resolve``), so the
benchmark serves exactly this server with its own fleet. Answers: 200 with the protocol's JSON; 400 for a body
or a header the extender cannot read; 401 without a valid platform token; 404 for an unknown host cluster or
path; 503 when the host cluster's state is not ready yet or anything unexpected happens (logged). Never 500:
with ``ignorable: true`` kube-scheduler goes on without the extender on any error or timeout.

No connection can hold up another: the accepting thread only accepts; each connection gets a thread of its
own, which does the TLS handshake (within HANDSHAKE_TIMEOUT seconds) and then serves requests until the client
goes quiet for IDLE_TIMEOUT seconds. At most MAX_CONNECTIONS are served at once; one more is closed at once
(and logged), so a flood of idle connections costs threads up to that bound and no more.
"""

from __future__ import annotations

import json
import logging
import ssl
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from placement.extender.pods import BadRequest
from placement.extender.state import Extender

log = logging.getLogger(__name__)
PREFIX = "/scheduler/v1/"
HANDSHAKE_TIMEOUT = 5.0  # seconds a client has to complete the TLS handshake (kube-scheduler's takes ms)
IDLE_TIMEOUT = (
    120.0  # seconds a connection may wait between requests (Go keeps idle ones 90 s) or stall in one
)
MAX_CONNECTIONS = 64  # connections served at once (kube-scheduler keeps a few)
MAX_BODY = 8 * 2**20
VERBS = ("filter", "prioritize")


def handle(extender: Extender, verb: str, body: bytes) -> tuple[int, Any]:
    """One extender call: (HTTP status, JSON-able answer). 400 for bad input, 404 for an unknown verb."""
    if verb not in VERBS:
        return 404, {"Error": f"unknown verb {verb!r}; this extender serves {', '.join(VERBS)}"}
    if len(body) > MAX_BODY:
        return 413, {"Error": f"body larger than {MAX_BODY} bytes"}
    try:
        args = json.loads(body)
        return 200, extender.filter(args) if verb == "filter" else extender.prioritize(args)
    except (ValueError, RecursionError) as e:  # JSONDecodeError and BadRequest are ValueErrors
        message = str(e) if isinstance(e, BadRequest) else f"the body is not JSON: {e}"
        return 400, {"Error": message}


class NotReady(Exception):
    """The host cluster's state is still being listed (or cannot be): answer 503, kube-scheduler goes on."""


Resolve = Callable[[str], Extender | None]  # host-cluster name -> its extender; None: unknown; NotReady
Authorize = Callable[[str], bool]  # the bearer token -> allowed


class _JsonHandler(BaseHTTPRequestHandler):
    """What both ports share: JSON answers, ``GET /healthz``, quiet request logs."""

    protocol_version = "HTTP/1.1"
    timeout = IDLE_TIMEOUT  # every read from the client: a quiet connection is closed, freeing its thread
    unknown_get = "no such path {path}"  # the 404 for any other GET

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s %s", self.server.__class__.__name__, format % args)

    def _send(self, status: int, payload: Any) -> None:
        body = json.dumps(payload, separators=(",", ":")).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        if status == 401:
            self.send_header("WWW-Authenticate", 'Bearer realm="gpucloud"')
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path == "/healthz":
            self._send(200, {"status": "ok"})
        else:
            self._send(404, {"Error": self.unknown_get.format(path=self.path)})


class _Handler(_JsonHandler):
    disable_nagle_algorithm = True  # headers and body are two writes: no 40 ms delayed-ACK stall between them
    server: ExtenderServer

    def do_POST(self) -> None:
        try:
            self._post()
        except OSError:  # the client went away, or stalled mid-body past IDLE_TIMEOUT: nobody to answer
            self.close_connection = True
        except Exception:  # the last line of failing open: never a 500, never a dropped connection
            log.exception("extender call failed", extra={"path": self.path})
            self._send(503, {"Error": "the extender failed; see gpucloud's log"})

    def _post(self) -> None:
        header = (self.headers.get("Content-Length") or "0").strip()
        if not header.isdigit():  # the body cannot be found: neither it nor what follows can be read
            self.close_connection = True
            self._send(400, {"Error": f"Content-Length must be a whole number of bytes, not {header[:40]!r}"})
            return
        length = int(header)
        if length > MAX_BODY:
            self.close_connection = True
            self._send(413, {"Error": f"body larger than {MAX_BODY} bytes"})
            return
        body = self.rfile.read(length)
        parts = self.path.split("?", 1)[0].removeprefix(PREFIX).split("/")
        if not self.path.startswith(PREFIX) or len(parts) != 2:
            self._send(404, {"Error": f"no such path {self.path}; use {PREFIX}<host-cluster>/<verb>"})
            return
        scheme, _, token = (self.headers.get("Authorization") or "").partition(" ")
        bearer = scheme.lower() == "bearer" and self.server.authorize(token.strip())
        if not (bearer or self.server.client_certificates):  # mutual TLS: the handshake authenticated it
            self._send(
                401,
                {"Error": "a platform administrator's bearer token (or a client certificate) is required"},
            )
            return
        try:
            extender = self.server.resolve(parts[0])
        except NotReady as e:
            self._send(503, {"Error": str(e)})
            return
        if extender is None:
            self._send(404, {"Error": f"no Kubernetes host cluster {parts[0]!r}"})
            return
        self._send(*handle(extender, parts[1], body))


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    thread_name = "extender"

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[BaseHTTPRequestHandler],
        max_connections: int = MAX_CONNECTIONS,
    ) -> None:
        super().__init__(address, handler)
        self.tls: ssl.SSLContext | None = None
        self.max_connections = max_connections
        self.slots = threading.BoundedSemaphore(max_connections)

    def start(self) -> threading.Thread:
        """Serve from a background thread; stop with ``shutdown()``."""
        thread = threading.Thread(target=self.serve_forever, name=self.thread_name, daemon=True)
        thread.start()
        return thread

    def process_request(self, request: Any, client_address: Any) -> None:
        """On the accepting thread: hand the connection to a thread of its own, if one is free."""
        if not self.slots.acquire(blocking=False):
            log.warning("%d connections open: refused one from %s", self.max_connections, client_address[0])
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()

    def finish_request(self, request: Any, client_address: Any) -> None:
        """On the connection's own thread: the TLS handshake (bounded), then the requests."""
        if self.tls is None:
            super().finish_request(request, client_address)
            return
        request.settimeout(HANDSHAKE_TIMEOUT)
        try:
            connection = self.tls.wrap_socket(request, server_side=True)
        except (OSError, ssl.SSLError) as e:  # idle, not TLS, or no certificate the CA issued
            log.info("TLS handshake with %s failed: %s", client_address[0], e)
            return
        try:
            super().finish_request(connection, client_address)
        finally:
            self.shutdown_request(connection)


class ExtenderServer(_Server):
    """Serves the extender verbs for the host clusters ``resolve`` knows."""

    def __init__(
        self,
        address: tuple[str, int],
        resolve: Resolve,
        authorize: Authorize,
        max_connections: int = MAX_CONNECTIONS,
    ) -> None:
        super().__init__(address, _Handler, max_connections)
        self.resolve = resolve
        self.authorize = authorize
        self.client_certificates = False  # set by use_tls with a client CA: every connection is authenticated

    def use_tls(self, cert: str, key: str, client_ca: str = "") -> None:
        """Serve HTTPS; with ``client_ca``, only clients holding a certificate it issued may connect.

        The listening socket stays plain: each connection's handshake runs on its own thread
        (``finish_request``), never in ``accept()`` on the thread every connection waits for."""
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(cert, key)
        if client_ca:
            context.load_verify_locations(client_ca)
            context.verify_mode = ssl.CERT_REQUIRED
            self.client_certificates = True
        self.tls = context

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"


class _HealthHandler(_JsonHandler):
    unknown_get = "no such path {path}; this port serves /healthz only"

    def do_POST(self) -> None:  # the verbs are never served here, in plain HTTP
        self.close_connection = True
        self._send(404, {"Error": "this port serves GET /healthz only; the verbs are on the extender's port"})


class HealthServer(_Server):
    """``GET /healthz`` in plain HTTP for the kubelet's probes; nothing else, no credentials needed."""

    thread_name = "extender-health"

    def __init__(self, address: tuple[str, int]) -> None:
        super().__init__(address, _HealthHandler)
