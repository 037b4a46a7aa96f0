"""Rate card versions: cards made at the same moment each get a version of their own."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

import pytest
from django.db import connection

from billing.models import RateCard
from billing.services.rates import create_rate_card
from core.audit import Actor

ADMIN = Actor.console("tests")


@pytest.mark.django_db(transaction=True)
def test_cards_made_at_once_each_get_the_next_version_instead_of_a_conflict(gpu_catalog):
    made, failed, start = [], [], threading.Barrier(4)

    def make(month: int) -> None:
        start.wait()
        try:
            card = create_rate_card(
                actor=ADMIN, effective_from=datetime(2026, month, 1, tzinfo=UTC), prices={"h100-80gb": "2.50"}
            )
            made.append(card.version)
        except Exception as exc:  # the assertion below names it
            failed.append(repr(exc))
        finally:
            connection.close()

    threads = [threading.Thread(target=make, args=(month,)) for month in (1, 2, 3, 4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert failed == []
    assert sorted(made) == [1, 2, 3, 4]
    assert RateCard.objects.count() == 4
