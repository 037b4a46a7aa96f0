"""Transactions run again after a real deadlock (gpucloud/transactions.py), and a deadlock is never a 500."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection, transaction

from gpucloud import transactions
from gpucloud.api.problems import exception_handler
from gpucloud.errors import Busy
from tenants.models import Tenant

pytestmark = pytest.mark.django_db(transaction=True)


class Meet:
    """Two threads meet here once: a run again (a retry) goes straight through."""

    def __init__(self) -> None:
        self.barrier, self.met = threading.Barrier(2, timeout=30), threading.local()

    def wait(self) -> None:
        if not getattr(self.met, "done", False):
            self.met.done = True
            self.barrier.wait()


def crossing_updates(first: int, second: int, start: Meet) -> None:
    """Lock tenant `first`, wait for the other thread to lock its own, then ask for `second`."""
    Tenant.objects.select_for_update().get(pk=first)
    start.wait()
    Tenant.objects.filter(pk=second).update(display_name=f"touched by {first}")


def run_crossed(fn: Any, a: int, b: int) -> dict[int, Any]:
    """`fn(first, second, barrier)` in two threads at once, a→b and b→a: what each returned or raised."""
    start, outcome = Meet(), {}

    def one(first: int, second: int) -> None:
        try:
            outcome[first] = fn(first, second, start)
        except Exception as exc:
            outcome[first] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=one, args=pair) for pair in ((a, b), (b, a))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return outcome


@pytest.fixture
def two(make_tenant: Any) -> tuple[int, int]:
    if connection.vendor != "postgresql":
        pytest.fail(
            "this test is about PostgreSQL's deadlock detection; run it with DATABASE_URL=postgres://…"
        )
    return make_tenant("one").pk, make_tenant("two").pk


def test_without_a_retry_one_of_two_crossing_transactions_dies_of_a_deadlock(two):
    outcome = run_crossed(transaction.atomic(crossing_updates), *two)

    failed = [o for o in outcome.values() if isinstance(o, Exception)]
    assert len(failed) == 1
    assert transactions.is_conflict(failed[0])


def test_the_transaction_the_database_ends_for_a_deadlock_is_run_again_and_both_complete(two):
    runs: list[int] = []

    def counted(first: int, second: int, start: Meet) -> None:
        runs.append(first)
        crossing_updates(first, second, start)

    outcome = run_crossed(transactions.atomic(counted), *two)

    assert outcome == {two[0]: None, two[1]: None}
    # Counted, not read from the log: another test's logging configuration may keep caplog from seeing it.
    assert len(runs) == 3, "the one the database ended was run again, once"
    names = set(Tenant.objects.filter(pk__in=two).values_list("display_name", flat=True))
    assert names == {f"touched by {two[0]}", f"touched by {two[1]}"}


def test_out_of_attempts_a_deadlock_is_busy_a_503_saying_to_send_it_again(two, monkeypatch):
    monkeypatch.setattr(transactions, "ATTEMPTS", 1)

    outcome = run_crossed(transactions.atomic(crossing_updates), *two)

    busy = [o for o in outcome.values() if isinstance(o, Busy)]
    assert len(busy) == 1
    response = exception_handler(busy[0], {})
    assert response.status_code == 503
    assert response["Retry-After"] == "1"
    assert response.data["type"] == "/problems/busy"
    assert "nothing was changed" in response.data["detail"]


def test_a_deadlock_inside_a_callers_transaction_goes_up_to_it_and_answers_503_not_500(two):
    def nested(first: int, second: int, start: Meet) -> None:
        with transaction.atomic():  # the caller's: the service inside cannot run it again alone
            transactions.atomic(crossing_updates)(first, second, start)

    outcome = run_crossed(nested, *two)

    raw = [o for o in outcome.values() if isinstance(o, Exception)]
    assert len(raw) == 1
    assert transactions.is_conflict(raw[0])
    assert exception_handler(raw[0], {}).status_code == 503
