"""Withdrawing a rate card: one no issued invoice used can be deleted, a used one retired from an end date
(after which the card it had replaced applies again); both audited, through the service and the API."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest
from django.utils import timezone

from billing.models import InvoiceLine, RateCard
from billing.services.ingest import ingest_scrape
from billing.services.invoicing import draft_invoice, issue_invoice
from billing.services.rates import (
    RateCardInUse,
    create_rate_card,
    delete_rate_card,
    retire_rate_card,
    withdraw_rate_card,
)
from billing.tests.conftest import Row, exposition, gpu_uuid
from core.audit import Actor
from core.models import AuditEvent
from gpucloud.errors import PermissionDenied, ValidationFailed

ADMIN = Actor.console("tests")


def when(month: int, day: int, hour: int = 0) -> datetime:
    return datetime(2026, month, day, hour, tzinfo=UTC)


@pytest.fixture
def acme(mini, tenant_on, settings):
    """acme used one H100 from 10:00 to 12:00 on 10 May and on 10 June (hourly samples)."""
    settings.METER_MAX_GAP = 3600
    tenant = tenant_on("acme")
    for month in (5, 6):
        for hour in (10, 11, 12):
            rows = [Row(gpu_uuid("h100-0", 0), pod="tenant-acme/train")]
            ingest_scrape(mini, "h100-0", when(month, 10, hour), exposition("h100-0", rows))
    return tenant


def card(day: datetime, price: str) -> RateCard:
    return create_rate_card(actor=ADMIN, effective_from=day, prices={"h100-80gb": price})


def priced(invoice) -> list[tuple[Decimal, int | None]]:
    return [(line.amount, line.rate_card_version) for line in InvoiceLine.objects.filter(invoice=invoice)]


def test_a_card_no_invoice_used_is_deleted_and_audited(db):
    mistake = card(when(1, 1), "2.00")
    delete_rate_card(actor=ADMIN, card=mistake)
    assert not RateCard.objects.exists()
    event = AuditEvent.objects.get(action="rate_card.delete")
    assert (event.object_id, event.before["prices"]) == (mistake.public_id, {"h100-80gb": "2.00"})


def test_a_card_an_issued_invoice_used_cannot_be_deleted_but_is_retired(acme):
    april = card(when(4, 1), "2.00")
    may = issue_invoice(actor=ADMIN, invoice=draft_invoice(actor=ADMIN, tenant=acme, year=2026, month=5))
    with pytest.raises(RateCardInUse) as refused:
        delete_rate_card(actor=ADMIN, card=april)
    assert may.public_id in refused.value.detail
    assert "retire it instead" in refused.value.detail

    retired = retire_rate_card(actor=ADMIN, card=april, effective_until=when(6, 1))

    assert retired.effective_until == when(6, 1)
    event = AuditEvent.objects.get(action="rate_card.retire")
    assert (event.before["effective_until"], event.after["effective_until"]) == (
        None,
        "2026-06-01T00:00:00+00:00",
    )
    assert priced(may) == [(Decimal("4.00"), april.version)]  # the issued invoice keeps its prices


def test_after_a_retired_cards_end_the_card_it_replaced_applies_again(acme):
    april = card(when(4, 1), "2.00")
    mistake = card(when(5, 1), "300.00")
    retire_rate_card(actor=ADMIN, card=mistake, effective_until=when(6, 1))

    may = draft_invoice(actor=ADMIN, tenant=acme, year=2026, month=5)
    june = draft_invoice(actor=ADMIN, tenant=acme, year=2026, month=6)

    assert priced(may) == [(Decimal("600.00"), mistake.version)]
    assert priced(june) == [(Decimal("4.00"), april.version)]


def test_a_deleted_card_prices_no_draft_again_and_its_version_is_not_reused(acme):
    april = card(when(4, 1), "2.00")
    mistake = card(when(5, 1), "300.00")
    assert priced(draft_invoice(actor=ADMIN, tenant=acme, year=2026, month=5)) == [
        (Decimal("600.00"), mistake.version)
    ]
    delete_rate_card(actor=ADMIN, card=mistake)  # only a draft used it

    assert priced(draft_invoice(actor=ADMIN, tenant=acme, year=2026, month=5)) == [
        (Decimal("4.00"), april.version)
    ]
    assert card(when(7, 1), "2.50").version == mistake.version + 1


def test_a_retirement_cannot_reach_back_into_a_month_issued_with_the_card_or_before_its_start(acme):
    april = card(when(4, 1), "2.00")
    issue_invoice(actor=ADMIN, invoice=draft_invoice(actor=ADMIN, tenant=acme, year=2026, month=5))
    with pytest.raises(ValidationFailed) as inside_may:
        retire_rate_card(actor=ADMIN, card=april, effective_until=when(5, 20))
    assert "issued up to 2026-06-01" in inside_may.value.errors["effective_until"][0]
    with pytest.raises(ValidationFailed) as before_start:
        retire_rate_card(actor=ADMIN, card=card(when(8, 1), "2.00"), effective_until=when(7, 1))
    assert "cannot end before it began" in before_start.value.errors["effective_until"][0]
    assert not RateCard.objects.exclude(effective_until=None).exists()


def test_withdrawing_deletes_an_unused_card_and_retires_a_used_one_from_now(acme):
    april, unused = card(when(4, 1), "2.00"), card(when(9, 1), "2.20")
    issue_invoice(actor=ADMIN, invoice=draft_invoice(actor=ADMIN, tenant=acme, year=2026, month=5))
    before = timezone.now()

    assert withdraw_rate_card(actor=ADMIN, card=unused) is None
    retired = withdraw_rate_card(actor=ADMIN, card=april)

    assert not RateCard.objects.filter(pk=unused.pk).exists()
    assert retired is not None
    assert retired.effective_until is not None
    assert retired.effective_until >= max(before, when(6, 1))


def test_only_platform_administrators_delete_or_retire(people):
    listed = card(when(1, 1), "2.00")
    alice = Actor.of(people["alice"])
    with pytest.raises(PermissionDenied):
        delete_rate_card(actor=alice, card=listed)
    with pytest.raises(PermissionDenied):
        retire_rate_card(actor=alice, card=listed)


def test_the_api_deletes_an_unused_card_and_answers_a_used_one_with_a_409_naming_retire(api, people, acme):
    client = api(people["admin"])
    april, unused = card(when(4, 1), "2.00"), card(when(9, 1), "2.20")
    issue_invoice(actor=ADMIN, invoice=draft_invoice(actor=ADMIN, tenant=acme, year=2026, month=5))

    assert client.delete(f"/api/v1/rate-cards/{unused.public_id}/").status_code == 204
    refused = client.delete(f"/api/v1/rate-cards/{april.public_id}/")
    assert refused.status_code == 409
    assert refused.json()["type"] == "/problems/rate-card-in-use"

    early = client.post(
        f"/api/v1/rate-cards/{april.public_id}/retire/", {"effective_until": "2026-05-02T00:00:00Z"}
    )
    assert early.status_code == 400
    assert "effective_until" in early.json()["errors"]
    retired = client.post(
        f"/api/v1/rate-cards/{april.public_id}/retire/",
        {"effective_until": "2026-07-01T00:00:00Z"},
        format="json",
    )
    assert retired.status_code == 200, retired.content
    assert retired.json()["effective_until"] == "2026-07-01T00:00:00Z"
    assert (
        client.get(f"/api/v1/rate-cards/{april.public_id}/").json()["effective_until"]
        == "2026-07-01T00:00:00Z"
    )
    assert [
        e.actor for e in AuditEvent.objects.filter(action__in=["rate_card.delete", "rate_card.retire"])
    ] == [
        people["admin"],
        people["admin"],
    ]


def test_people_who_are_not_platform_administrators_cannot_withdraw_a_card_through_the_api(api, people):
    listed = card(when(1, 1), "2.00")
    assert api(people["alice"]).delete(f"/api/v1/rate-cards/{listed.public_id}/").status_code == 403
    assert api(people["alice"]).post(f"/api/v1/rate-cards/{listed.public_id}/retire/").status_code == 403
    assert RateCard.objects.get().effective_until is None
