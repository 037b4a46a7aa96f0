"""CSV and FinOps FOCUS exports of invoices, per tenant and platform-wide; every download audited."""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, datetime
from decimal import Decimal

import pytest

from billing.exports import CSV_COLUMNS, FOCUS_COLUMNS
from billing.metering import PodLifecycle
from billing.services.ingest import ClusterFacts, ingest_scrape
from billing.services.invoicing import draft_invoice, issue_invoice
from billing.services.rates import create_rate_card
from billing.tests.conftest import Row, exposition, gpu_uuid
from core.audit import Actor
from core.models import AuditEvent

ADMIN = Actor.console("tests")
# The FOCUS columns the first billing issue asked for; the export (FOCUS 1.2 now) must carry each of them.
REQUIRED_FOCUS = {
    "BilledCost",
    "EffectiveCost",
    "ListCost",
    "BillingCurrency",
    "BillingPeriodStart",
    "BillingPeriodEnd",
    "ChargePeriodStart",
    "ChargePeriodEnd",
    "ChargeCategory",
    "ConsumedQuantity",
    "ConsumedUnit",
    "PricingQuantity",
    "PricingUnit",
    "ResourceId",
    "ResourceName",
    "ServiceName",
    "SkuId",
    "SubAccountId",
    "SubAccountName",
    "Tags",
}


def when(month: int, day: int, hour: int) -> datetime:
    return datetime(2026, month, day, hour, tzinfo=UTC)


@pytest.fixture
def invoices(mini, people, settings):
    """tenant-a: 2 H100-hours in May at 2.00 (issued); tenant-b: 1 H100-hour (draft)."""
    settings.METER_MAX_GAP = 3600
    for key in ("a", "b"):
        cluster = people[key].cluster
        cluster.host_cluster = mini
        cluster.save()
    create_rate_card(actor=ADMIN, effective_from=when(1, 1, 0), prices={"h100-80gb": "2.00"})
    for hour in (1, 2, 3):
        rows = [Row(gpu_uuid("h100-0", 0), pod="tenant-tenant-a/x")]
        # GPU 1 is listed idle once y is gone, as the exporter lists every GPU (a GPU gone is a fault)
        rows.append(Row(gpu_uuid("h100-0", 1), index=1, pod="tenant-tenant-b/y" if hour < 3 else ""))
        y_ended = {("tenant-tenant-b", "y"): PodLifecycle(None, when(5, 4, 2).timestamp())}
        ingest_scrape(
            mini, "h100-0", when(5, 4, hour), exposition("h100-0", rows), facts=ClusterFacts(y_ended)
        )
    a = issue_invoice(actor=ADMIN, invoice=draft_invoice(actor=ADMIN, tenant=people["a"], year=2026, month=5))
    b = draft_invoice(actor=ADMIN, tenant=people["b"], year=2026, month=5)
    return people, a, b


def read(response):
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "text/csv"
    return list(csv.DictReader(io.StringIO(response.content.decode())))


def test_the_focus_export_has_every_focus_column_and_the_right_numbers(api, invoices):
    people, a, _ = invoices
    response = api(people["alice"]).get(f"/api/v1/invoices/{a.public_id}/focus/")
    rows = read(response)
    assert set(FOCUS_COLUMNS) >= REQUIRED_FOCUS
    assert list(rows[0]) == list(FOCUS_COLUMNS)
    (row,) = rows
    assert {
        k: row[k]
        for k in (
            "BilledCost",
            "EffectiveCost",
            "ListCost",
            "BillingCurrency",
            "ConsumedQuantity",
            "ConsumedUnit",
            "PricingUnit",
            "SkuId",
            "SubAccountId",
            "ChargeCategory",
        )
    } == {
        "BilledCost": "4.00",
        "EffectiveCost": "4.00",
        "ListCost": "4.00",
        "BillingCurrency": "USD",
        "ConsumedQuantity": "2.000000",
        "ConsumedUnit": "GPU-Hours",
        "PricingUnit": "GPU-Hours",
        "SkuId": "h100-80gb",
        "SubAccountId": people["a"].public_id,
        "ChargeCategory": "Usage",
    }
    assert (row["BillingPeriodStart"], row["BillingPeriodEnd"]) == (
        "2026-05-01T00:00:00Z",
        "2026-06-01T00:00:00Z",
    )
    assert (row["ChargePeriodStart"], row["ChargePeriodEnd"]) == (
        "2026-05-04T01:00:00Z",
        "2026-05-04T03:00:00Z",
    )
    assert json.loads(row["Tags"])["gpucloud.io/tenant"] == "tenant-a"


def test_the_csv_export_has_its_columns_and_the_line_amounts(api, invoices):
    people, a, _ = invoices
    rows = read(api(people["alice"]).get(f"/api/v1/invoices/{a.public_id}/csv/"))
    assert list(rows[0]) == list(CSV_COLUMNS)
    assert [(r["gpu_class"], Decimal(r["gpu_hours"]), r["amount"], r["state"]) for r in rows] == [
        ("h100-80gb", Decimal(2), "4.00", "issued")
    ]


def test_the_platform_wide_export_holds_every_tenant_and_a_tenant_sees_only_its_own(api, invoices):
    people, _, _ = invoices
    everyone = read(api(people["admin"]).get("/api/v1/invoices/export/?month=2026-05&as=focus"))
    assert sorted((r["SubAccountName"], r["BilledCost"]) for r in everyone) == [
        ("tenant-a", "4.00"),
        ("tenant-b", "2.00"),
    ]
    own = read(api(people["charlie"]).get("/api/v1/invoices/export/?month=2026-05&as=csv"))
    assert [r["tenant"] for r in own] == ["tenant-b"]


def test_every_download_is_audited(api, invoices):
    people, a, _ = invoices
    api(people["alice"]).get(f"/api/v1/invoices/{a.public_id}/csv/")
    event = AuditEvent.objects.get(action="billing.export")
    assert (event.actor, event.tenant, event.after) == (people["alice"], people["a"], {"format": "csv"})


def test_another_tenants_invoice_cannot_be_exported(api, invoices):
    people, a, _ = invoices
    assert api(people["charlie"]).get(f"/api/v1/invoices/{a.public_id}/focus/").status_code == 404


def test_a_bad_month_is_a_problem(api, invoices):
    response = api(invoices[0]["admin"]).get("/api/v1/invoices/export/?month=May")
    assert response.status_code == 400
    assert "YYYY-MM" in response.json()["detail"]


def test_the_focus_export_is_focus_12_and_10_is_offered_by_parameter(api, invoices):
    people, a, _ = invoices
    client = api(people["alice"])
    (row,) = read(client.get(f"/api/v1/invoices/{a.public_id}/focus/"))
    assert list(row) == list(FOCUS_COLUMNS)
    assert (row["InvoiceId"], row["ServiceSubcategory"], row["SkuMeter"]) == (
        a.public_id,
        "AI Platforms",
        "GPU Usage",
    )
    assert (row["SkuPriceId"], json.loads(row["SkuPriceDetails"])) == (
        "h100-80gb:gpu-hour",
        {"GpuCount": 1, "x_GpuModel": "h100-80gb"},
    )
    (old,) = read(client.get(f"/api/v1/invoices/{a.public_id}/focus/?focus_version=1.0"))
    assert "InvoiceId" not in old
    assert "SkuMeter" not in old
    assert old["SkuId"] == "h100-80gb"
    refused = client.get(f"/api/v1/invoices/{a.public_id}/focus/?focus_version=0.5")
    assert refused.status_code == 400
    assert "1.2, 1.0" in refused.json()["errors"]["focus_version"][0]
