"""The gateway and vLLM stand-ins served over real HTTP, on one event loop in a thread of the test process
(the gateway's database work runs in its own threads, so the tests that use this are transactional)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Coroutine
from typing import Any, TypeVar

from aiohttp import web
from django.conf import settings

from inference.gateway.app import DRAINING, Gateway
from tests.vllm_standin import StandIn

T = TypeVar("T")


class Harness:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.runners: list[web.AppRunner] = []
        self.gateway: Gateway | None = None

    def run(self, coroutine: Coroutine[Any, Any, T] | Awaitable[T], timeout: float = 60) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)  # type: ignore[arg-type]

    def standin(self, model: str) -> tuple[StandIn, str]:
        """A stand-in replica serving `model`, and its base URL."""
        standin = StandIn(model)

        async def start() -> int:
            runner = web.AppRunner(standin.app(), access_log=None, shutdown_timeout=1)
            await runner.setup()
            await web.TCPSite(runner, "127.0.0.1", 0).start()
            self.runners.append(runner)
            return int(runner.addresses[0][1])

        return standin, f"http://127.0.0.1:{self.run(start())}"

    def start_gateway(self) -> str:
        async def start() -> Gateway:
            gateway = Gateway("127.0.0.1", 0, settings.CELERY_BROKER_URL)
            await gateway.start()
            return gateway

        self.gateway = self.run(start())
        return f"http://127.0.0.1:{self.gateway.port}"

    def close(self) -> None:
        if self.gateway is not None and not self.gateway.app[DRAINING].is_set():
            self.run(self.gateway.drain(0))
        for runner in self.runners:
            self.run(runner.cleanup())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
