"""Bad billing input is a 400 naming what is allowed; the invoice list honours its filters."""

from __future__ import annotations

import pytest

from billing.models import Invoice
from billing.services import invoicing
from core.audit import Actor


@pytest.mark.parametrize("month", ["0000-01", "1999-12", "3000-01", "9999-12"])
def test_an_invoice_month_out_of_range_is_a_400_naming_the_range(api, people, month):
    client = api(people["admin"])
    drafted = client.post("/api/v1/invoices/", {"tenant": "tenant-a", "month": month}, format="json")
    assert drafted.status_code == 400
    assert "from 2000-01 to 2999-12" in drafted.json()["errors"]["month"][0]
    exported = client.get(f"/api/v1/invoices/export/?month={month}")
    assert exported.status_code == 400
    assert "from 2000-01 to 2999-12" in exported.json()["errors"]["month"][0]
    assert not Invoice.objects.exists()


def test_a_rate_card_without_prices_is_refused(api, people):
    body = {"effective_from": "2026-01-01T00:00:00Z", "prices": {}}
    response = api(people["admin"]).post("/api/v1/rate-cards/", body, format="json")
    assert response.status_code == 400
    assert "at least one price" in response.json()["errors"]["prices"][0]


def test_the_invoice_list_filters_by_tenant(api, people):
    for tenant in (people["a"], people["b"]):
        invoicing.draft_invoice(actor=Actor.of(people["admin"]), tenant=tenant, year=2026, month=5)
    client = api(people["admin"])

    only_a = client.get("/api/v1/invoices/?tenant=tenant-a").json()
    assert [row["tenant"] for row in only_a["results"]] == ["tenant-a"]
    assert client.get("/api/v1/invoices/?tenant=nobody").status_code == 404  # as /usage/ answers it
