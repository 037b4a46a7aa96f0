"""Password sign-in lock-outs, counted in the shared cache (the database's, or Redis: GPUCLOUD_CACHE_URL).

Attempts count per account and source address: after GPUCLOUD_LOGIN_ATTEMPTS wrong passwords for one account
from one address, that account is locked for that address until GPUCLOUD_LOGIN_ATTEMPTS_WINDOW seconds pass,
while other people behind the same address still sign in. An address also has a ceiling over all accounts
(GPUCLOUD_LOGIN_ATTEMPTS_PER_ADDRESS), so trying one password on many accounts is stopped too.

An attempt is counted before its password is checked, in one atomic increment per count, and given back when
it is refused or the password is right: so however many requests arrive at once, in however many processes,
no more than the limit are ever checked. (Checking the count first and counting the failure afterwards let
every request in flight through.)
"""

from __future__ import annotations

import contextlib
import hashlib

from django.conf import settings
from django.core.cache import cache


def _keys(username: str, address: str) -> tuple[str, str]:
    # The username is hashed: it is whatever was typed, and cache keys must stay short and plain.
    account = hashlib.sha256(username.encode(errors="replace")).hexdigest()[:32]
    return f"login-failures:{address}:{account}", f"login-failures:{address}"


def _take(key: str) -> int:
    """One more on `key`'s count, atomically; the window starts with the count's first attempt."""
    window = settings.LOGIN_ATTEMPTS_WINDOW
    try:
        count = int(cache.incr(key))
    except ValueError:  # no count yet, or its window ended
        if cache.add(key, 1, timeout=window):
            return 1
        count = int(cache.incr(key))  # another request started it just now
    if count == 1:  # Redis's INCR made the key anew (its window ended between Django's check and INCR)
        cache.touch(key, window)
    return count


def _give_back(*keys: str) -> None:
    for key in keys:
        with contextlib.suppress(ValueError):  # the window ended meanwhile: nothing left to give back
            cache.decr(key)


def attempt(username: str, address: str) -> bool:
    """Count a password attempt for `username` from `address`; False when the account or the address is over
    its limit: then nothing stays counted and the password must not be checked."""
    account, everyone = _keys(username, address)
    if _take(account) > settings.LOGIN_ATTEMPTS:
        _give_back(account)
        return False
    if _take(everyone) > settings.LOGIN_ATTEMPTS_PER_ADDRESS:
        _give_back(account, everyone)
        return False
    return True


def succeeded(username: str, address: str) -> None:
    """A right password: that account's count from that address is cleared, and the attempt is given back
    to the address's ceiling (the failures of other accounts stay)."""
    account, everyone = _keys(username, address)
    cache.delete(account)
    _give_back(everyone)
