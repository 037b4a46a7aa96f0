"""The one task decorator every app declares its Celery tasks with.

It gives every task the same contract: an explicit name, late acknowledgement (a worker killed mid-task leaves
the message to be redelivered), no result backend, and bounded retries with backoff and jitter for temporary
errors only. Anything else is a bug or a permanent error and is not retried.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from celery.signals import task_failure
from django.db import DatabaseError

from gpucloud.celery import app
from gpucloud.errors import TemporaryError
from gpucloud.observability import TASK_FAILURES

TEMPORARY_ERRORS = (TemporaryError, DatabaseError, ConnectionError, TimeoutError)
F = TypeVar("F", bound=Callable[..., Any])


def task(name: str, *, max_retries: int = 8) -> Callable[[F], Any]:
    def wrap(fn: F) -> Any:
        return app.task(
            name=name,
            acks_late=True,
            ignore_result=True,
            autoretry_for=TEMPORARY_ERRORS,
            max_retries=max_retries,
            retry_backoff=1,
            retry_backoff_max=60,
            retry_jitter=True,
        )(fn)

    return wrap


def _count_failure(sender: Any = None, **_: Any) -> None:
    TASK_FAILURES.labels(getattr(sender, "name", "unknown")).inc()


task_failure.connect(_count_failure)  # a call, not a decorator: celery's signals are untyped
