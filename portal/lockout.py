"""Password sign-in lock-outs, counted in the cache (share it between web processes: GPUCLOUD_CACHE_URL).

Failures count per account and source address: after GPUCLOUD_LOGIN_ATTEMPTS wrong passwords for one account
from one address, that account is locked for that address until GPUCLOUD_LOGIN_ATTEMPTS_WINDOW seconds pass,
while other people behind the same address still sign in. An address also has a ceiling over all accounts
(GPUCLOUD_LOGIN_ATTEMPTS_PER_ADDRESS), so trying one password on many accounts is stopped too.
"""

from __future__ import annotations

import hashlib

from django.conf import settings
from django.core.cache import cache


def _keys(username: str, address: str) -> tuple[str, str]:
    # The username is hashed: it is whatever was typed, and cache keys must stay short and plain.
    account = hashlib.sha256(username.encode(errors="replace")).hexdigest()[:32]
    return f"login-failures:{address}:{account}", f"login-failures:{address}"


def locked(username: str, address: str) -> bool:
    """Whether password sign-in for `username` from `address` is refused for now."""
    account, everyone = _keys(username, address)
    counts = cache.get_many([account, everyone])
    return (
        counts.get(account, 0) >= settings.LOGIN_ATTEMPTS
        or counts.get(everyone, 0) >= settings.LOGIN_ATTEMPTS_PER_ADDRESS
    )


def count_failure(username: str, address: str) -> None:
    for key in _keys(username, address):
        cache.add(key, 0, timeout=settings.LOGIN_ATTEMPTS_WINDOW)  # the window starts at the first failure
        try:
            cache.incr(key)
        except ValueError:  # the window ended between add and incr
            cache.set(key, 1, timeout=settings.LOGIN_ATTEMPTS_WINDOW)


def forget_failures(username: str, address: str) -> None:
    """A right password clears that account's count from that address (not the address's ceiling)."""
    cache.delete(_keys(username, address)[0])
