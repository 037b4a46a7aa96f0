"""Every task retries temporary errors (from any app) and nothing else, through the one decorator."""

from __future__ import annotations

import pytest
from celery import current_app
from django.db import OperationalError

from gpucloud.kube.errors import PermanentDriverError, TemporaryDriverError
from gpucloud.locks import LockBusy

# Sorted: the registry's order differs between processes, and pytest-xdist's workers must collect alike.
TASKS = sorted(name for name in current_app.tasks if name.startswith(("workers.", "billing.")))


def test_every_app_declares_its_tasks_with_the_one_decorator():
    assert set(TASKS) >= {"workers.reconcile_tenant", "workers.reconcile_all", "billing.collect_usage"}


@pytest.mark.parametrize("name", TASKS)
def test_a_task_retries_temporary_errors_only(name):
    retried = current_app.tasks[name].autoretry_for
    temporary = (TemporaryDriverError("timeout"), LockBusy("busy"), OperationalError("gone"), TimeoutError())
    assert [e for e in temporary if not isinstance(e, retried)] == [], f"{name} does not retry these"
    permanent = (PermanentDriverError("403"), ValueError("bug"))
    assert [e for e in permanent if isinstance(e, retried)] == [], f"{name} retries these"
