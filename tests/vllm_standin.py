"""A vLLM stand-in for tests: an OpenAI-compatible server that answers deterministically, reports `usage` as
vLLM does, streams server-sent events, and can be told to fail or slow down. Not the product.

Deterministic: a prompt's tokens are its whitespace-separated words (of every message's content, or of
`prompt`, or of `input` for embeddings); a completion is `max_tokens` words (8 by default), `w0 w1 …`, one
per stream chunk. So a test knows exactly what the gateway must meter.

Modes (`StandIn.mode`): "ok"; "fail" answers 500 before anything; "drop" closes the connection before its
first byte; "break" streams two chunks, then closes the connection. `delay` sleeps before each chunk (and
before a whole answer). `requests` keeps every body received, `streams_finished` counts streams written to
their end.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from aiohttp import web

DEFAULT_MAX_TOKENS = 8
EMBEDDING_SIZE = 4


def prompt_tokens(body: dict[str, Any]) -> int:
    if "messages" in body:
        return sum(len(str(m.get("content", "")).split()) for m in body["messages"])
    text = body.get("prompt", body.get("input", ""))
    texts = text if isinstance(text, list) else [text]
    return sum(len(str(t).split()) for t in texts)


def completion_words(body: dict[str, Any]) -> list[str]:
    return [f"w{i}" for i in range(int(body.get("max_tokens") or DEFAULT_MAX_TOKENS))]


class StandIn:
    """One stand-in replica; `app()` is its aiohttp application."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.mode = "ok"
        self.delay = 0.0
        self.requests: list[dict[str, Any]] = []
        self.streams_finished = 0  # streams written to their end (a caller that went away cuts one short)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self.complete)
        app.router.add_post("/v1/completions", self.complete)
        app.router.add_post("/v1/embeddings", self.embed)
        app.router.add_get("/health", self.health)
        return app

    async def health(self, request: web.Request) -> web.Response:
        return web.Response(text="")

    async def _misbehave(self, request: web.Request) -> web.Response | None:
        if self.mode == "fail":
            return web.json_response({"object": "error", "message": "engine dead", "code": 500}, status=500)
        if self.mode == "drop":
            assert request.transport is not None
            request.transport.close()
            raise asyncio.CancelledError
        return None

    def _usage(self, body: dict[str, Any], completion: int) -> dict[str, int]:
        prompt = prompt_tokens(body)
        return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}

    async def complete(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.requests.append(body)
        misbehaving = await self._misbehave(request)
        if misbehaving is not None:
            return misbehaving
        chat = request.path.endswith("chat/completions")
        words = completion_words(body)
        if body.get("stream"):
            return await self._stream(request, body, words, chat)
        await asyncio.sleep(self.delay)
        text = " ".join(words)
        choice: dict[str, Any] = {"index": 0, "finish_reason": "length", "logprobs": None}
        if chat:
            choice["message"] = {"role": "assistant", "content": text}
        else:
            choice["text"] = text
        return web.json_response(
            {
                "id": "cmpl-standin",
                "object": "chat.completion" if chat else "text_completion",
                "created": int(time.time()),
                "model": self.model,
                "choices": [choice],
                "usage": self._usage(body, len(words)),
            }
        )

    async def _stream(
        self, request: web.Request, body: dict[str, Any], words: list[str], chat: bool
    ) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        kind = "chat.completion.chunk" if chat else "text_completion"
        for i, word in enumerate(words):
            if self.mode == "break" and i == 2:
                assert request.transport is not None
                request.transport.close()
                return response
            await asyncio.sleep(self.delay)
            piece = word if i == 0 else " " + word
            choice: dict[str, Any] = {"index": 0, "finish_reason": "length" if i == len(words) - 1 else None}
            choice |= {"delta": {"content": piece}} if chat else {"text": piece}
            chunk = {"id": "cmpl-standin", "object": kind, "model": self.model, "choices": [choice]}
            await response.write(f"data: {json.dumps(chunk)}\n\n".encode())
        if (body.get("stream_options") or {}).get("include_usage"):
            usage: dict[str, Any] = {"id": "cmpl-standin", "object": kind, "model": self.model, "choices": []}
            usage |= {"usage": self._usage(body, len(words))}
            await response.write(f"data: {json.dumps(usage)}\n\n".encode())
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        self.streams_finished += 1
        return response

    async def embed(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.requests.append(body)
        misbehaving = await self._misbehave(request)
        if misbehaving is not None:
            return misbehaving
        inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
        data = [
            {"object": "embedding", "index": i, "embedding": [float(len(str(text)))] * EMBEDDING_SIZE}
            for i, text in enumerate(inputs)
        ]
        prompt = prompt_tokens(body)
        return web.json_response(
            {
                "object": "list",
                "model": self.model,
                "data": data,
                "usage": {"prompt_tokens": prompt, "total_tokens": prompt},
            }
        )
