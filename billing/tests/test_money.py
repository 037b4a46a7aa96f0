"""The one money type: prices, multipliers and budgets have explicit bounds and places at every door, and a
value outside them is a 400 naming the field and the range, never a 500 or a silently changed amount."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest

from billing import money
from billing.models import Budget, RateCard
from gpucloud.errors import ValidationFailed

CARD = {"effective_from": "2026-01-01T00:00:00Z", "prices": {"h100-80gb": "2.50"}}


@pytest.mark.parametrize(
    ("kind", "value", "says"),
    [
        (money.PRICE, "1e30", "1e30 is out of range"),
        (money.PRICE, "1000000", "is out of range"),
        (money.PRICE, "-0.01", "is out of range"),
        (money.PRICE, "2.1234567", "has too many decimal places"),
        (money.PRICE, "NaN", "is not a decimal number"),
        (money.PRICE, "Infinity", "is not a decimal number"),
        (money.PRICE, "two", "is not a decimal number"),
        (money.PRICE, True, "is not a decimal number"),
        (money.PRICE, "1e-999999999", "has too many decimal places"),
        (money.MULTIPLIER, "100", "is out of range"),
        (money.BUDGET, "0", "is out of range"),
        (money.BUDGET, "1e30", "is out of range"),
        (money.BUDGET, 1234567890123456.12, "send it as a string"),
    ],
)
def test_a_value_outside_its_kind_is_refused_naming_the_field_and_the_range(kind, value, says):
    with pytest.raises(ValidationFailed) as refused:
        kind.parse(value, "prices.h100-80gb")
    (message,) = refused.value.errors["prices.h100-80gb"]
    assert says in message
    assert f"{kind.what} is {kind.rule}" in message
    assert refused.value.detail.startswith("prices.h100-80gb: ")


@pytest.mark.parametrize(
    ("kind", "value", "parsed"),
    [
        (money.PRICE, "999999.999999", "999999.999999"),
        (money.PRICE, "0", "0"),
        (money.PRICE, "3.10", "3.10"),
        (money.PRICE, "2.50000000", "2.500000"),  # trailing zeros are not places
        (money.PRICE, "1e2", "100"),
        (money.PRICE, 4.5, "4.5"),  # a JSON number (Terraform sends numbers)
        (money.MULTIPLIER, "99.9999", "99.9999"),
        (money.BUDGET, "12345678901234.12", "12345678901234.12"),
        (money.BUDGET, "9999999999999999.99", "9999999999999999.99"),
    ],
)
def test_a_value_within_its_kind_is_kept_exactly(kind, value, parsed):
    assert str(kind.parse(value, "x")) == parsed


def test_each_kind_states_its_digits_places_and_bounds_once_for_every_door():
    assert (money.PRICE.max_digits, money.PRICE.decimal_places, money.PRICE.maximum) == (
        12,
        6,
        Decimal("999999.999999"),
    )
    assert (money.MULTIPLIER.max_digits, money.MULTIPLIER.maximum) == (6, Decimal("99.9999"))
    assert (money.BUDGET.max_digits, money.BUDGET.minimum) == (18, Decimal("0.01"))
    column = Budget._meta.get_field("monthly_amount")
    assert (column.max_digits, column.decimal_places) == (money.BUDGET.max_digits, 2)
    # The largest price × the largest multiplier still fits an invoice line's unit price column.
    unit_price = Budget._meta.apps.get_model("billing", "InvoiceLine")._meta.get_field("unit_price")
    assert len(str(int(money.PRICE.maximum * money.MULTIPLIER.maximum))) <= (
        unit_price.max_digits - unit_price.decimal_places
    )


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({**CARD, "prices": {"h100-80gb": "1e30"}}, "prices.h100-80gb"),
        ({**CARD, "prices": {"h100-80gb": 1e30}}, "prices.h100-80gb"),
        ({**CARD, "tier_multipliers": {"isolated": "1e30"}}, "tier_multipliers.isolated"),
        ({**CARD, "prices": {"h100-80gb": "2.1234567"}}, "prices.h100-80gb"),
    ],
)
def test_the_api_refuses_a_rate_card_price_or_multiplier_out_of_range_with_a_400(api, people, body, field):
    response = api(people["admin"]).post("/api/v1/rate-cards/", body, format="json")
    assert response.status_code == 400, response.content
    problem = response.json()
    assert "from 0 to" in problem["errors"][field][0]
    assert field in problem["detail"]
    assert not RateCard.objects.exists()


def test_a_card_stored_before_the_bounds_held_leaves_the_rate_card_list_readable(api, people):
    """On the starting code a 1e30 price made `GET /api/v1/rate-cards/` a 500 for good."""
    RateCard.objects.create(
        version=1,
        effective_from=datetime(2026, 1, 1, tzinfo=UTC),
        prices={"h100-80gb": "1E+30"},
        tier_multipliers={"isolated": "1E+30"},
    )
    client = api(people["alice"])
    listed = client.get("/api/v1/rate-cards/")
    assert listed.status_code == 200, listed.content
    (card,) = listed.json()["results"]
    assert card["prices"] == {"h100-80gb": "1" + "0" * 30}
    assert client.get(f"/api/v1/rate-cards/{card['id']}/").status_code == 200


def test_the_api_answers_prices_with_the_places_of_their_kind(api, people):
    created = api(people["admin"]).post("/api/v1/rate-cards/", CARD, format="json")
    assert created.status_code == 201
    assert created.json()["prices"] == {"h100-80gb": "2.500000"}
    assert RateCard.objects.get().prices == {"h100-80gb": "2.50"}  # kept as written


@pytest.mark.parametrize("amount", ["1e30", "0", "-5", "10.001", 1234567890123456.12])
def test_the_api_refuses_a_budget_out_of_range_and_keeps_the_old_one(api, people, amount):
    client = api(people["alice"])
    first = client.post("/api/v1/budgets/", {"tenant": "tenant-a", "monthly_amount": "100"}, format="json")
    assert first.status_code == 201
    response = client.post(
        "/api/v1/budgets/", {"tenant": "tenant-a", "monthly_amount": amount}, format="json"
    )
    assert response.status_code == 400, response.content
    assert (
        "a monthly budget is a decimal number from 0.01 to 9999999999999999.99"
        in (response.json()["errors"]["monthly_amount"][0])
    )
    assert Budget.objects.get(tenant=people["a"]).monthly_amount == Decimal("100.00")


@pytest.mark.parametrize("amount", ["12345678901234.12", 1234567890123.12])
def test_a_budget_of_many_digits_is_stored_and_answered_exactly(api, people, amount):
    response = api(people["alice"]).post(
        "/api/v1/budgets/", {"tenant": "tenant-a", "monthly_amount": amount}, format="json"
    )
    assert response.status_code == 201, response.content
    assert response.json()["monthly_amount"] == str(amount)
    assert str(Budget.objects.get(tenant=people["a"]).monthly_amount) == str(amount)


def test_the_openapi_schema_states_the_range_of_each_amount(api, people):
    schema = api(people["alice"]).get("/api/schema/?format=json").json()["components"]["schemas"]
    price = schema["RateCard"]["properties"]["prices"]
    assert "999999.999999" in price["description"]
    assert (
        "9999999999999999.99" in schema["BudgetWriteRequest"]["properties"]["monthly_amount"]["description"]
    )
    assert (
        schema["RateCard"]["properties"]["prices"]["additionalProperties"]["pattern"] == money.PRICE.pattern
    )
