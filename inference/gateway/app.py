"""`gpucloud gateway`: the OpenAI API in front of the tenants' inference endpoints (docs/inference.md).

An aiohttp application (server and upstream client in one library, already what the tests' Kubernetes
stand-in runs on; README, "Dependencies"): a streaming proxy spends its time waiting on sockets, which one
event loop does for thousands of requests where the WSGI web process would hold a thread each.

A request: the key (`Authorization: Bearer gpk_…`) and the `model` it names pick the endpoint
(`store.grant`: 401, 403, 404, 429 budget, 503 stopped), Redis counts it against the key's rpm and tpm
(`limits`), the body goes to the endpoint's upstream, and the answer comes back as it arrives: a JSON body
whole, a stream (`stream: true`) event by event. Streams ask the upstream for usage
(`stream_options.include_usage`); the usage event is passed on only if the caller asked for it too. Every
request that reached an endpoint is metered once (`store.record`) in a `finally`, so a caller that goes away
mid-stream is metered too (with what was counted so far, `completed` false). Errors the gateway answers
itself are in OpenAI's shape, `{"error": {"message", "type", "param", "code"}}`.

Probes: `/healthz` (the loop answers), `/readyz` (Redis answers and the gateway is not draining). On SIGTERM
`serve` marks itself not ready, waits GATEWAY_DRAIN_DELAY for the Service to stop sending, stops listening,
and lets requests in flight (streams included) finish for up to GATEWAY_DRAIN_TIMEOUT.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import signal
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import aiohttp
from aiohttp import web
from django.conf import settings
from django.db import DatabaseError, close_old_connections
from redis.asyncio import Redis

from inference.gateway import limits, store
from inference.gateway.store import Grant, Metered, Refused

log = logging.getLogger("gpucloud.gateway")
T = TypeVar("T")

ROUTES = {"chat/completions", "completions", "embeddings"}
STREAMING = {"chat/completions", "completions"}
EXECUTOR = web.AppKey("executor", ThreadPoolExecutor)
REDIS = web.AppKey("redis", Redis)
CLIENT = web.AppKey("client", aiohttp.ClientSession)
DRAINING = web.AppKey("draining", asyncio.Event)


def error(status: int, message: str, type: str, code: str, retry_after: int | None = None) -> web.Response:
    """An answer in OpenAI's error shape."""
    body = {"error": {"message": message, "type": type, "param": None, "code": code}}
    headers = {"Retry-After": str(retry_after)} if retry_after is not None else None
    return web.json_response(body, status=status, headers=headers)


def refused(refusal: Refused) -> web.Response:
    return error(refusal.status, refusal.message, refusal.type, refusal.code, refusal.retry_after)


def _in_thread(fn: Callable[[], T]) -> T:
    try:
        return fn()
    finally:
        close_old_connections()  # hand the connection back (CONN_MAX_AGE 0, or the pool) between requests


async def db(request: web.Request, fn: Callable[[], T]) -> T:
    """Run a database function in the gateway's thread pool (Django's ORM is synchronous)."""
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(request.app[EXECUTOR], _in_thread, fn)


def bearer(request: web.Request) -> str:
    scheme, _, value = request.headers.get("Authorization", "").partition(" ")
    return value.strip() if scheme.lower() == "bearer" else ""


async def healthz(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


async def readyz(request: web.Request) -> web.Response:
    if request.app[DRAINING].is_set():
        return web.json_response({"status": "draining"}, status=503)
    try:
        await request.app[REDIS].ping()
    except Exception as e:  # any failure to reach Redis means not ready; say which
        return web.json_response({"status": f"Redis does not answer: {e}"}, status=503)
    return web.json_response({"status": "ready"})


async def list_models(request: web.Request) -> web.Response:
    try:
        rows = await db(request, lambda: store.models(bearer(request)))
    except Refused as refusal:
        return refused(refusal)
    return web.json_response({"object": "list", "data": rows})


async def _body(request: web.Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise Refused(400, "the body is not JSON", "invalid_request_error", "invalid_json") from None
    if not isinstance(body, dict):
        raise Refused(400, "the body must be a JSON object", "invalid_request_error", "invalid_json")
    return body


async def proxy(request: web.Request) -> web.StreamResponse:
    """POST /v1/{chat/completions,completions,embeddings}."""
    route = request.match_info["route"]
    started = time.monotonic()
    try:
        body = await _body(request)
        model = body.get("model")
        grant = await db(request, lambda: store.grant(bearer(request), model))  # type: ignore[arg-type]
    except Refused as refusal:
        return refused(refusal)
    stream = route in STREAMING and body.get("stream") is True
    metered = Metered(request_id=f"req_{uuid.uuid4().hex}", route=route, stream=stream)
    try:
        await limits.admit(request.app[REDIS], grant.caller)
        if stream:
            return await _stream(request, grant, body, metered, started)
        return await _whole(request, grant, body, metered, started)
    except Refused as refusal:
        metered.status = refusal.status
        return refused(refusal)
    finally:
        metered.latency_ms = int((time.monotonic() - started) * 1000)
        await asyncio.shield(_meter(request, grant, metered))


async def _meter(request: web.Request, grant: Grant, metered: Metered) -> None:
    if metered.recorded:
        return
    metered.recorded = True
    try:
        await limits.spend(request.app[REDIS], grant.caller, metered.tokens)
    except Exception:  # Redis down: the usage row below is still the ledger
        log.exception("could not count %s's tokens for tpm", grant.caller.public_id)
    await db(request, lambda: store.record(grant, metered))


def _upstream_error(grant: Grant, e: Exception) -> Refused:
    if isinstance(e, asyncio.TimeoutError):
        return Refused(
            504,
            f"the endpoint serving {grant.model!r} did not answer in time",
            "server_error",
            "upstream_timeout",
        )
    if isinstance(e, aiohttp.ClientConnectorError):
        message = f"no replica of the endpoint serving {grant.model!r} is reachable ({e.os_error})"
        return Refused(503, message, "server_error", "upstream_unavailable")
    message = f"the endpoint serving {grant.model!r} broke off: {e}"
    return Refused(502, message, "server_error", "upstream_error")


def _timeout() -> aiohttp.ClientTimeout:
    return aiohttp.ClientTimeout(
        total=None, sock_connect=settings.GATEWAY_CONNECT_TIMEOUT, sock_read=settings.GATEWAY_READ_TIMEOUT
    )


def _check_upstream_status(grant: Grant, status: int, text: str) -> None:
    """An upstream 5xx becomes 502 in our shape (its message kept); its 4xx pass through as they are."""
    if status >= 500:
        message = f"the endpoint serving {grant.model!r} failed ({status}): {text[:500]}"
        raise Refused(502, message, "server_error", "upstream_error")


async def _whole(
    request: web.Request, grant: Grant, body: dict[str, Any], metered: Metered, started: float
) -> web.Response:
    url = f"{grant.upstream}/v1/{request.match_info['route']}"
    try:
        async with request.app[CLIENT].post(url, json=body, timeout=_timeout()) as answer:
            payload = await answer.read()
            status = answer.status
    except (TimeoutError, aiohttp.ClientError) as e:
        raise _upstream_error(grant, e) from None
    metered.first_byte_ms = int((time.monotonic() - started) * 1000)
    _check_upstream_status(grant, status, payload.decode(errors="replace"))
    if status == 200:
        try:
            metered.read_usage(json.loads(payload).get("usage"))
        except (ValueError, AttributeError):
            raise Refused(
                502, "the endpoint answered something that is not JSON", "server_error", "upstream_error"
            ) from None
    metered.status = status
    return web.Response(body=payload, status=status, content_type="application/json")


async def _stream(
    request: web.Request, grant: Grant, body: dict[str, Any], metered: Metered, started: float
) -> web.StreamResponse:
    given = body.get("stream_options")
    options: dict[str, Any] = given if isinstance(given, dict) else {}
    wants_usage = bool(options.get("include_usage"))
    upstream_body = {**body, "stream_options": {**options, "include_usage": True}}
    url = f"{grant.upstream}/v1/{request.match_info['route']}"
    try:
        answer = await request.app[CLIENT].post(url, json=upstream_body, timeout=_timeout())
    except (TimeoutError, aiohttp.ClientError) as e:
        raise _upstream_error(grant, e) from None
    async with answer:
        if answer.status != 200:
            text = await answer.text(errors="replace")
            _check_upstream_status(grant, answer.status, text)
            metered.status = answer.status
            return web.Response(text=text, status=answer.status, content_type="application/json")
        response = web.StreamResponse(
            status=200, headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await response.prepare(request)
        metered.status = 200
        metered.completed = False
        try:
            async for event in _events(answer):
                if metered.first_byte_ms is None:
                    metered.first_byte_ms = int((time.monotonic() - started) * 1000)
                if _usage_event(event, metered) and not wants_usage:
                    continue
                if event.startswith(b"data: [DONE]"):
                    # On the ledger before the caller sees the end: what it was told happened is metered.
                    metered.completed = True
                    metered.latency_ms = int((time.monotonic() - started) * 1000)
                    await asyncio.shield(_meter(request, grant, metered))
                await response.write(event)
            metered.completed = True
        except (ConnectionResetError, aiohttp.ClientConnectionResetError):
            log.info("the caller of %s went away mid-stream", metered.request_id)  # upstream closed below
        except (TimeoutError, aiohttp.ClientError) as e:
            log.warning("the upstream of %s broke off mid-stream: %s", metered.request_id, e)
            metered.status = 502
            metered.latency_ms = int((time.monotonic() - started) * 1000)
            await asyncio.shield(_meter(request, grant, metered))  # on the ledger before the caller hears
            # Past the first byte the status is sent: the error goes as an event (OpenAI's clients raise it).
            message = f"the endpoint serving {grant.model!r} broke off mid-stream"
            failure = {
                "error": {"message": message, "type": "server_error", "param": None, "code": "upstream_error"}
            }
            with contextlib.suppress(ConnectionResetError, aiohttp.ClientConnectionResetError):
                await response.write(f"data: {json.dumps(failure)}\n\n".encode())
        with contextlib.suppress(ConnectionResetError, aiohttp.ClientConnectionResetError):
            await response.write_eof()
        return response


async def _events(answer: aiohttp.ClientResponse) -> Any:
    """The upstream's server-sent events, one `data: …` block (with its blank line) at a time."""
    lines: list[bytes] = []
    async for line in answer.content:
        lines.append(line)
        if line in (b"\n", b"\r\n"):
            yield b"".join(lines)
            lines = []
    if lines:
        yield b"".join(lines) + b"\n"


def _usage_event(event: bytes, metered: Metered) -> bool:
    """Read the usage of a stream's usage event (no choices, a `usage`); whether this is that event."""
    for line in event.splitlines():
        if not line.startswith(b"data:"):
            continue
        data = line[5:].strip()
        if data == b"[DONE]" or b'"usage"' not in data:
            return False
        try:
            chunk = json.loads(data)
        except ValueError:
            return False
        usage = chunk.get("usage") if isinstance(chunk, dict) else None
        if isinstance(usage, dict):
            metered.read_usage(usage)
            return not chunk.get("choices")
    return False


@web.middleware
async def failures(request: web.Request, handler: Any) -> web.StreamResponse:
    """What went wrong inside the gateway is still answered in OpenAI's shape: 503 when its database does not
    answer (a caller may retry), 500 otherwise (logged with its traceback)."""
    try:
        response: web.StreamResponse = await handler(request)
        return response
    except web.HTTPException:
        raise
    except DatabaseError:
        log.exception("the gateway's database failed on %s %s", request.method, request.path)
        return error(
            503, "the gateway cannot reach its database; retry", "server_error", "gateway_unavailable", 1
        )
    except Exception:
        log.exception("the gateway failed on %s %s", request.method, request.path)
        return error(500, "the gateway failed; this is gpucloud's fault", "server_error", "internal_error")


async def not_found(request: web.Request) -> web.Response:
    return error(404, f"no route {request.method} {request.path}", "invalid_request_error", "unknown_url")


def build(redis_url: str) -> web.Application:
    """The gateway's application, with its thread pool, Redis and upstream client made on startup."""
    app = web.Application(client_max_size=32 * 1024 * 1024, middlewares=[failures])
    app[DRAINING] = asyncio.Event()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/v1/models", list_models)
    app.router.add_post("/v1/{route:chat/completions|completions|embeddings}", proxy)
    app.router.add_route("*", "/{tail:.*}", not_found)

    async def resources(app: web.Application) -> Any:
        app[EXECUTOR] = ThreadPoolExecutor(settings.GATEWAY_DB_THREADS, thread_name_prefix="gateway-db")
        app[REDIS] = Redis.from_url(redis_url)
        app[CLIENT] = aiohttp.ClientSession(auto_decompress=False)
        yield
        await app[CLIENT].close()
        await app[REDIS].aclose()
        app[EXECUTOR].shutdown(wait=True)

    app.cleanup_ctx.append(resources)
    return app


def redis_url() -> str:
    """GPUCLOUD_GATEWAY_REDIS_URL, else the broker's when it is Redis."""
    url = settings.GATEWAY_REDIS_URL or settings.CELERY_BROKER_URL
    if not url.startswith(("redis://", "rediss://", "unix://")):
        raise ValueError(
            "the gateway counts rpm and tpm in Redis: set GPUCLOUD_GATEWAY_REDIS_URL (or a redis:// "
            f"CELERY_BROKER_URL); the broker is {url.split(':', 1)[0]}"
        )
    return url


class Gateway:
    """The gateway served on `host:port` until `drain()`: the process and the tests run the same code."""

    def __init__(self, host: str, port: int, redis: str) -> None:
        self.app = build(redis)
        self.runner = web.AppRunner(
            self.app, access_log=None, shutdown_timeout=settings.GATEWAY_DRAIN_TIMEOUT
        )
        self.host, self.port = host, port

    async def start(self) -> None:
        await self.runner.setup()
        site = web.TCPSite(self.runner, self.host, self.port)
        await site.start()
        self.port = self.runner.addresses[0][1]

    async def drain(self, delay: float) -> None:
        """Not ready, then after `delay` stop listening, finish what is in flight, close."""
        self.app[DRAINING].set()
        await asyncio.sleep(delay)
        await self.runner.cleanup()


async def serve(host: str, port: int, ready: Callable[[int], None] = lambda port: None) -> None:
    """Serve until SIGTERM or SIGINT, then drain (module docstring)."""
    gateway = Gateway(host, port, redis_url())
    await gateway.start()
    ready(gateway.port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    await stop.wait()
    log.info("draining: not ready now, closing in %ss", settings.GATEWAY_DRAIN_DELAY)
    await gateway.drain(settings.GATEWAY_DRAIN_DELAY)
