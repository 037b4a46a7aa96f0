"""A key's `rpm` and `tpm` limits, counted in Redis so every gateway replica shares them.

Fixed one-minute windows (the UTC minute), as LiteLLM's proxy counts them: a counter per key and minute,
`INCR`ed for each request and `INCRBY`ed with each response's tokens, expiring after two minutes. `INCR` is
atomic, so however many requests arrive at once on however many replicas, at most `rpm` of them get a number
at or below the limit. `tpm` is checked before the request (its tokens are known only after): a key under its
limit may cross it by one response, and is refused until the window ends. A refusal says when the window ends
(`Retry-After`). A fixed window lets up to twice the limit through across a minute's boundary; a sliding
window would not, at the price of a sorted set per key; the limits are for fairness, not billing, so this
is the cheaper one.
"""

from __future__ import annotations

import time

from redis.asyncio import Redis
from redis.exceptions import RedisError

from inference.gateway.store import Caller, Refused

WINDOW = 60
PREFIX = "gpucloud:gateway"


def _window(now: float) -> tuple[int, int]:
    """The current window's number and the seconds until it ends (at least 1)."""
    minute = int(now // WINDOW)
    return minute, max(1, int((minute + 1) * WINDOW - now + 0.999))


async def admit(redis: Redis, caller: Caller) -> None:
    """Count the request against the key's `rpm`, refusing (429) it over `rpm` or `tpm`. Without Redis a
    limited key is refused (503): its limits cannot be kept, and serving it anyway could go far past them."""
    if caller.rpm is None and caller.tpm is None:
        return
    try:
        await _admit(redis, caller)
    except RedisError as e:
        message = f"the gateway cannot count this key's limits (Redis: {e}); retry"
        raise Refused(503, message, "server_error", "gateway_unavailable", 1) from None


async def _admit(redis: Redis, caller: Caller) -> None:
    minute, retry_after = _window(time.time())
    if caller.tpm is not None:
        used = int(await redis.get(f"{PREFIX}:tpm:{caller.public_id}:{minute}") or 0)
        if used >= caller.tpm:
            message = f"the key's limit of {caller.tpm} tokens per minute is reached ({used} this minute)"
            raise Refused(429, message, "tokens", "rate_limit_exceeded", retry_after)
    if caller.rpm is not None:
        name = f"{PREFIX}:rpm:{caller.public_id}:{minute}"
        async with redis.pipeline(transaction=True) as pipe:
            pipe.incr(name)
            pipe.expire(name, 2 * WINDOW)
            count, _ = await pipe.execute()
        if count > caller.rpm:
            message = f"the key's limit of {caller.rpm} requests per minute is reached"
            raise Refused(429, message, "requests", "rate_limit_exceeded", retry_after)


async def spend(redis: Redis, caller: Caller, tokens: int) -> None:
    """Add a response's tokens to the key's current minute (for `tpm`)."""
    if caller.tpm is None or tokens <= 0:
        return
    minute, _ = _window(time.time())
    name = f"{PREFIX}:tpm:{caller.public_id}:{minute}"
    async with redis.pipeline(transaction=True) as pipe:
        pipe.incrby(name, tokens)
        pipe.expire(name, 2 * WINDOW)
        await pipe.execute()
