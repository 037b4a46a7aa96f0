"""The portal's money forms (rate cards, budgets) post what people type to the billing services: a value
out of range comes back by its field with the range, never accepted, never a 500; a rate card can be deleted
or retired."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest

from billing.models import Budget, Invoice, InvoiceLine, RateCard
from billing.services import rates
from core.audit import Actor
from core.models import AuditEvent

NEW_CARD = {"effective_from": "2026-01-01", "currency": "USD", "prices": "h100-80gb = 3.10"}


@pytest.fixture
def platform_admin(client, people):
    client.force_login(people["admin"])
    return client


@pytest.mark.parametrize(
    ("fields", "field", "says"),
    [
        ({"prices": "h100-80gb = 1e30"}, "prices", "prices.h100-80gb: 1e30 is out of range"),
        (
            {"tier_multipliers": "isolated = 1e30"},
            "tier_multipliers",
            "tier_multipliers.isolated: 1e30 is out of range",
        ),
        ({"prices": "h100-80gb = 3.1234567"}, "prices", "has too many decimal places"),
    ],
)
def test_a_rate_card_out_of_range_is_refused_by_its_field_and_the_list_stays_readable(
    platform_admin, api, people, fields, field, says
):
    response = platform_admin.post("/rate-cards/", {**NEW_CARD, **fields})
    assert response.status_code == 200  # the form again, with the refusal
    form = response.context["form"]
    assert any("decimal number from 0 to" in message for message in form.errors[field])
    assert says in response.content.decode()
    assert not RateCard.objects.exists()
    assert api(people["alice"]).get("/api/v1/rate-cards/").status_code == 200


def test_a_rate_card_within_range_is_added_and_shown_as_written(platform_admin):
    response = platform_admin.post("/rate-cards/", NEW_CARD, follow=True)
    assert RateCard.objects.get().prices == {"h100-80gb": "3.10"}
    assert "3.10 USD" in response.content.decode()


@pytest.mark.parametrize("amount", ["1e30", "0", "10.001", "ten"])
def test_a_budget_out_of_range_is_a_form_error_not_a_server_error(client, people, amount):
    client.force_login(people["alice"])
    response = client.post("/tenants/tenant-a/invoices/", {"monthly_amount": amount, "currency": "USD"})
    assert response.status_code == 200
    (message,) = response.context["form"].errors["monthly_amount"]
    assert "a monthly budget is a decimal number from 0.01 to 9999999999999999.99" in message
    assert not Budget.objects.exists()


def test_a_budget_of_many_digits_is_stored_exactly(client, people):
    client.force_login(people["alice"])
    response = client.post(
        "/tenants/tenant-a/invoices/", {"monthly_amount": "12345678901234.12", "currency": "USD"}
    )
    assert response.status_code == 302
    assert Budget.objects.get(tenant=people["a"]).monthly_amount == Decimal("12345678901234.12")
    assert "12345678901234.12 USD" in client.get("/tenants/tenant-a/invoices/").content.decode()


def _card(people, day: int = 1) -> RateCard:
    return rates.create_rate_card(
        actor=Actor.of(people["admin"]),
        effective_from=datetime(2026, 1, day, tzinfo=UTC),
        prices={"h100-80gb": "2.00"},
    )


def _issue_with(card: RateCard, tenant) -> Invoice:
    """An issued January invoice with one line at the card's prices."""
    invoice = Invoice.objects.create(
        tenant=tenant,
        period_start=datetime(2026, 1, 1, tzinfo=UTC),
        period_end=datetime(2026, 2, 1, tzinfo=UTC),
        state=Invoice.State.ISSUED,
        trust_tier="standard",
    )
    InvoiceLine.objects.create(
        invoice=invoice, kind="usage", gpu_class="h100-80gb", description="usage",
        charge_start=invoice.period_start, charge_end=invoice.period_end, gpu_hours=1, list_unit_price=2,
        unit_price=2, list_amount=2, amount=2, currency="USD", rate_card_version=card.version,
    )  # fmt: skip
    return invoice


def test_an_unused_rate_card_is_deleted_from_the_portal_and_audited(platform_admin, people):
    card = _card(people)
    page = platform_admin.get("/rate-cards/").content.decode()
    assert f"/rate-cards/{card.public_id}/delete/" in page

    response = platform_admin.post(f"/rate-cards/{card.public_id}/delete/", follow=True)

    assert not RateCard.objects.exists()
    assert f"Rate card v{card.version} deleted." in response.content.decode()
    event = AuditEvent.objects.get(action="rate_card.delete")
    assert (event.actor, event.object_id) == (people["admin"], card.public_id)


def test_a_used_rate_card_is_retired_from_the_portal_not_deleted(platform_admin, people):
    card = _card(people)
    _issue_with(card, people["a"])
    page = platform_admin.get("/rate-cards/").content.decode()
    assert f"/rate-cards/{card.public_id}/retire/" in page
    assert f"/rate-cards/{card.public_id}/delete/" not in page

    refused = platform_admin.post(f"/rate-cards/{card.public_id}/delete/", follow=True)
    assert "retire it instead" in refused.content.decode()
    too_early = platform_admin.post(
        f"/rate-cards/{card.public_id}/retire/", {"effective_until": "2026-01-15"}, follow=True
    )
    assert "priced invoices issued up to 2026-02-01" in too_early.content.decode()
    platform_admin.post(f"/rate-cards/{card.public_id}/retire/", {"effective_until": "2026-03-01"})

    card.refresh_from_db()
    assert card.effective_until == datetime(2026, 3, 1, tzinfo=UTC)
    event = AuditEvent.objects.get(action="rate_card.retire")
    assert (event.actor, event.after["effective_until"]) == (people["admin"], "2026-03-01T00:00:00+00:00")


def test_only_platform_administrators_delete_or_retire_rate_cards(client, people):
    card = _card(people)
    client.force_login(people["alice"])
    assert client.post(f"/rate-cards/{card.public_id}/delete/").status_code == 403
    assert client.post(f"/rate-cards/{card.public_id}/retire/").status_code == 403
    assert RateCard.objects.get().effective_until is None
