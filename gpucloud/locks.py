"""Locks that keep two reconciles of one host cluster from running at once.

On PostgreSQL a session advisory lock (no row is written, so an idle reconcile stays write-free); on SQLite,
which only the single-machine embedded default uses, an flock on a file under var/ does the same across
the web, worker and beat processes.
"""

from __future__ import annotations

import fcntl
import hashlib
from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings
from django.db import connection

from gpucloud.errors import TemporaryError


class LockBusy(TemporaryError):
    """Someone else holds the lock; try again shortly."""


def _key(name: str) -> int:
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)


@contextmanager
def exclusive(name: str) -> Iterator[None]:
    """Hold the named lock for the block, or raise LockBusy at once."""
    if connection.vendor == "postgresql":
        with _advisory(name):
            yield
    else:
        with _flock(name):
            yield


@contextmanager
def _advisory(name: str) -> Iterator[None]:
    key = _key(name)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [key])
        if not cursor.fetchone()[0]:
            raise LockBusy(name)
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [key])


@contextmanager
def _flock(name: str) -> Iterator[None]:
    directory = settings.VAR_DIR / "locks"
    directory.mkdir(exist_ok=True)
    with open(directory / f"{hashlib.sha256(name.encode()).hexdigest()[:16]}.lock", "w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise LockBusy(name) from None
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
