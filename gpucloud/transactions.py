"""Transactions run again when the database ends them for another transaction's sake.

PostgreSQL ends one of two transactions that wait for each other in a circle ("deadlock detected", SQLSTATE
40P01) and, under SERIALIZABLE, one whose reads another changed meanwhile ("could not serialize access",
40001). Neither says anything about the request: run again, it succeeds. Locks taken in one global order
(`tenants/services/__init__.py`, "Lock order") keep deadlocks away; this is the net under that order.

Only the outermost transaction can be run again (a rolled-back savepoint leaves the outer transaction
aborted), so a function called inside another's transaction just runs, and the conflict goes up to whoever
opened the outer one. Out of attempts, the conflict is a `Busy`: a 503 with Retry-After, never a 500.
"""

from __future__ import annotations

import functools
import logging
import random
import time
from collections.abc import Callable
from typing import Any, TypeVar

from django.db import OperationalError, transaction

from gpucloud.errors import Busy

log = logging.getLogger(__name__)
CONFLICTS = frozenset({"40P01", "40001"})  # deadlock_detected, serialization_failure
ATTEMPTS = 3
F = TypeVar("F", bound=Callable[..., Any])


def is_conflict(exc: BaseException) -> bool:
    """Whether a database error is a deadlock or a serialization failure (psycopg's error is the cause)."""
    return isinstance(exc, OperationalError) and getattr(exc.__cause__, "sqlstate", None) in CONFLICTS


def busy(exc: BaseException) -> Busy:
    reason = str(exc).splitlines()[0] if str(exc) else "a conflict"
    return Busy(
        f"concurrent changes kept this one from completing ({reason}); nothing was changed, send it again"
    )


def retry_on_conflict(fn: F) -> F:
    """Run `fn` again (at most ATTEMPTS times in all, after a short random pause) when its transaction ends in
    a deadlock or a serialization failure; `fn` must open the outermost transaction and do nothing outside
    it that cannot be done twice (on_commit work runs only for the attempt that commits)."""

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        if transaction.get_connection().in_atomic_block:
            return fn(*args, **kwargs)  # nested: the outermost transaction's owner retries
        for attempt in range(1, ATTEMPTS + 1):
            try:
                return fn(*args, **kwargs)
            except OperationalError as exc:
                if not is_conflict(exc):
                    raise
                if attempt == ATTEMPTS:
                    raise busy(exc) from exc
                log.warning("%s: %s; running it again", fn.__qualname__, str(exc).splitlines()[0])
                time.sleep(random.uniform(0, 0.05 * 2**attempt))  # apart, so they do not meet again at once
        raise AssertionError("unreachable")

    return run  # type: ignore[return-value]


def atomic(fn: F) -> F:
    """`transaction.atomic` for a service: run again on a deadlock or a serialization failure when it is the
    outermost transaction (`retry_on_conflict`)."""
    return retry_on_conflict(transaction.atomic(fn))


def serialise(name: str) -> None:
    """Wait until no other transaction holds `name`, and hold it until this transaction ends.

    For a writer that reads a maximum and writes one more (a rate card's version): locking the rows read
    cannot stop two writers both reading the same maximum, least of all when there is no row yet. On
    PostgreSQL a transaction-scoped advisory lock on the name's hash; SQLite's IMMEDIATE transactions already
    admit one writer at a time.
    """
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("serialise() holds its lock until the transaction ends: call it inside one")
    connection = transaction.get_connection()
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", [f"gpucloud:{name}"])
