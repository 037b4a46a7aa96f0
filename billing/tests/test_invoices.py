"""Rating and invoices: rate cards in force by the hour, draft → issued, late usage as an adjustment."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest

from billing.models import Invoice, InvoiceLine
from billing.services.ingest import ingest_scrape
from billing.services.invoicing import draft_invoice, issue_invoice
from billing.services.rates import create_rate_card
from billing.tests.conftest import A100, Row, exposition, gpu_uuid
from core.audit import Actor
from core.models import AuditEvent
from gpucloud.errors import Conflict, PermissionDenied

ADMIN = Actor.console("tests")


def when(month: int, day: int, hour: int) -> datetime:
    return datetime(2026, month, day, hour, tzinfo=UTC)


def scrape(mini, moment, *rows, node="h100-0"):
    return ingest_scrape(mini, node, moment, exposition(node, rows))


def lines(invoice):
    return [
        (line.kind, line.gpu_class, line.gpu_hours, line.unit_price, line.amount, line.rate_card_version)
        for line in InvoiceLine.objects.filter(invoice=invoice).order_by("kind", "gpu_class", "charge_start")
    ]


@pytest.fixture
def cards(db):
    """v1 from April; v2 from 16 May raises the H100 from 2.00 to 3.00 per GPU-hour. A100 MIG is derived."""
    create_rate_card(
        actor=ADMIN, effective_from=when(4, 1, 0), prices={"h100-80gb": "2.00", "a100-80gb": "1.40"}
    )
    create_rate_card(
        actor=ADMIN, effective_from=when(5, 16, 0), prices={"h100-80gb": "3.00", "a100-80gb": "1.40"}
    )


@pytest.fixture
def may(mini, tenant_on, cards, settings):
    """acme's May: two H100s for 2 h on the 10th, one H100 and a 3g.40gb slice for 1 h on the 20th."""
    settings.METER_MAX_GAP = 3600  # hourly samples keep the arithmetic readable
    acme = tenant_on("acme")
    pod = "tenant-acme/train"
    for hour in (10, 11, 12):
        scrape(
            mini,
            when(5, 10, hour),
            Row(gpu_uuid("h100-0", 0), pod=pod),
            Row(gpu_uuid("h100-0", 1), index=1, pod=pod),
        )
    for hour in (10, 11):
        scrape(mini, when(5, 20, hour), Row(gpu_uuid("h100-0", 0), pod=pod))
        gpu = gpu_uuid("a100-0", 0)
        slice_rows = [Row(gpu, model=A100), Row(gpu, model=A100, pod=pod, profile="3g.40gb", gi="1")]
        scrape(mini, when(5, 20, hour), *slice_rows, node="a100-0")
    return acme


def test_a_month_with_a_mid_month_rate_change_has_a_line_per_price(may):
    invoice = draft_invoice(actor=ADMIN, tenant=may, year=2026, month=5)
    assert lines(invoice) == [
        ("usage", "a100-80gb.mig-3g.40gb", Decimal("1.000000"), Decimal("0.600000"), Decimal("0.60"), 2),
        ("usage", "h100-80gb", Decimal("4.000000"), Decimal("2.000000"), Decimal("8.00"), 1),
        ("usage", "h100-80gb", Decimal("1.000000"), Decimal("3.000000"), Decimal("3.00"), 2),
    ]
    assert (invoice.total, invoice.currency, invoice.state) == (Decimal("11.60"), "USD", "draft")
    assert invoice.public_id.startswith("inv_")


def test_late_usage_after_issue_becomes_an_adjustment_on_the_next_invoice(may, mini):
    may_invoice = issue_invoice(
        actor=ADMIN, invoice=draft_invoice(actor=ADMIN, tenant=may, year=2026, month=5)
    )
    issued_lines = lines(may_invoice)
    # A node whose samples arrive late: one H100-hour on 31 May, written after May was issued.
    late = Row(gpu_uuid("h100-0", 2), index=2, pod="tenant-acme/late")
    scrape(mini, when(5, 31, 22), late)
    scrape(mini, when(5, 31, 23), late)
    # June's own usage: one H100-hour.
    scrape(mini, when(6, 2, 10), Row(gpu_uuid("h100-0", 0), pod="tenant-acme/june"))
    scrape(mini, when(6, 2, 11), Row(gpu_uuid("h100-0", 0), pod="tenant-acme/june"))

    assert draft_invoice(actor=ADMIN, tenant=may, year=2026, month=5).total == Decimal("11.60")
    assert lines(may_invoice) == issued_lines
    june = draft_invoice(actor=ADMIN, tenant=may, year=2026, month=6)
    assert lines(june) == [
        ("adjustment", "h100-80gb", Decimal("1.000000"), Decimal("3.000000"), Decimal("3.00"), 2),
        ("usage", "h100-80gb", Decimal("1.000000"), Decimal("3.000000"), Decimal("3.00"), 2),
    ]
    adjustment = june.lines.get(kind="adjustment")
    assert (adjustment.charge_start, adjustment.charge_end) == (when(5, 31, 22), when(5, 31, 23))
    issue_invoice(actor=ADMIN, invoice=june)
    july = draft_invoice(actor=ADMIN, tenant=may, year=2026, month=7)
    assert lines(july) == []  # the late hour was billed once, on June's invoice


def test_an_issued_invoice_cannot_be_issued_again(may):
    invoice = issue_invoice(actor=ADMIN, invoice=draft_invoice(actor=ADMIN, tenant=may, year=2026, month=5))
    with pytest.raises(Conflict, match="already issued"):
        issue_invoice(actor=ADMIN, invoice=invoice)
    assert AuditEvent.objects.filter(action="invoice.issue", object_id=invoice.public_id).count() == 1


def test_months_are_issued_in_order(may):
    draft_invoice(actor=ADMIN, tenant=may, year=2026, month=5)
    june = draft_invoice(actor=ADMIN, tenant=may, year=2026, month=6)
    with pytest.raises(Conflict, match="issue the earlier invoice"):
        issue_invoice(actor=ADMIN, invoice=june)


def test_the_trust_tier_multiplier_scales_the_unit_price(mini, tenant_on, settings):
    settings.METER_MAX_GAP = 3600
    create_rate_card(
        actor=ADMIN,
        effective_from=when(1, 1, 0),
        prices={"h100-80gb": "2.50"},
        tier_multipliers={"isolated": "1.5"},
    )
    tenant = tenant_on("vault", trust_tier="isolated")
    for hour in (1, 2):
        scrape(mini, when(3, 3, hour), Row(gpu_uuid("h100-0", 3), index=3, pod="tenant-vault/p"))
    line = draft_invoice(actor=ADMIN, tenant=tenant, year=2026, month=3).lines.get()
    assert (line.list_unit_price, line.unit_price, line.list_amount, line.amount) == (
        Decimal("2.500000"),
        Decimal("3.750000"),
        Decimal("2.50"),
        Decimal("3.75"),
    )


def test_a_shared_gpu_class_is_priced_per_gpu_hour_of_its_share(mini, tenant_on, settings):
    settings.METER_MAX_GAP = 3600
    create_rate_card(actor=ADMIN, effective_from=when(1, 1, 0), prices={"h100-80gb": "2.00"})
    tenant = tenant_on("acme")
    for hour in (1, 2):
        scrape(
            mini,
            when(3, 3, hour),
            Row(gpu_uuid("h100-0", 0), pod="tenant-acme/a"),
            Row(gpu_uuid("h100-0", 0), pod="tenant-acme/b"),
        )
    line = draft_invoice(actor=ADMIN, tenant=tenant, year=2026, month=3).lines.get()
    assert (line.gpu_class, line.gpu_hours, line.amount) == (
        "h100-80gb.shared",
        Decimal("1.000000"),
        Decimal("2.00"),
    )


def test_only_platform_administrators_write_rate_cards(people):
    with pytest.raises(PermissionDenied):
        create_rate_card(
            actor=Actor.of(people["alice"]), effective_from=when(1, 1, 0), prices={"h100-80gb": "1"}
        )


def test_a_price_for_a_class_that_does_not_exist_is_refused(db):
    with pytest.raises(Exception, match="is not a GPU class"):
        create_rate_card(actor=ADMIN, effective_from=when(1, 1, 0), prices={"h100": "1"})


def test_the_invoice_api_lists_a_tenants_own_invoices_and_only_admins_issue(api, people):
    create_rate_card(actor=ADMIN, effective_from=when(1, 1, 0), prices={"h100-80gb": "2.00"})
    alice = api(people["alice"])
    created = alice.post("/api/v1/invoices/", {"tenant": "tenant-a", "month": "2026-05"}, format="json")
    assert created.status_code == 201, created.content
    invoice_id = created.json()["id"]
    assert alice.post(f"/api/v1/invoices/{invoice_id}/issue/").status_code == 403
    assert api(people["charlie"]).get(f"/api/v1/invoices/{invoice_id}/").status_code == 404
    assert api(people["charlie"]).get("/api/v1/invoices/").json()["count"] == 0
    issued = api(people["admin"]).post(f"/api/v1/invoices/{invoice_id}/issue/")
    assert issued.status_code == 200
    assert issued.json()["state"] == Invoice.State.ISSUED
    assert alice.get("/api/v1/invoices/").json()["results"][0]["id"] == invoice_id


def test_the_rate_card_api_is_written_by_admins_and_read_by_everyone(api, people):
    body = {"effective_from": "2026-06-01T00:00:00Z", "prices": {"h100-80gb": "2.10"}, "currency": "EUR"}
    assert api(people["alice"]).post("/api/v1/rate-cards/", body, format="json").status_code == 403
    created = api(people["admin"]).post("/api/v1/rate-cards/", body, format="json")
    assert created.status_code == 201, created.content
    assert created.json()["version"] == 1
    assert created.json()["id"].startswith("rc_")
    listed = api(people["alice"]).get("/api/v1/rate-cards/").json()
    assert listed["results"][0]["prices"] == {"h100-80gb": "2.100000"}


def test_drafting_an_invoice_is_audited_each_time_it_is_computed(api, people):
    create_rate_card(actor=ADMIN, effective_from=when(1, 1, 0), prices={"h100-80gb": "2.00"})
    alice = api(people["alice"])

    first = alice.post("/api/v1/invoices/", {"tenant": "tenant-a", "month": "2026-05"}, format="json").json()
    alice.post("/api/v1/invoices/", {"tenant": "tenant-a", "month": "2026-05"}, format="json")

    drafts = AuditEvent.objects.filter(action="invoice.draft", object_id=first["id"]).order_by("id")
    assert [(d.actor_label, d.tenant_id, d.before is None) for d in drafts] == [
        ("alice (token test)", people["a"].pk, True),
        ("alice (token test)", people["a"].pk, False),
    ]
    assert Decimal(drafts[0].after["total"]) == 0
    assert drafts[0].after["period"] == "2026-05"
