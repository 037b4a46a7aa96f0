"""Invoices as CSV and as FinOps FOCUS 1.2 rows (1.0 on request), for finance tools. Formatting only: no
writes here."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from billing.models import Invoice, InvoiceLine
from gpucloud import spreadsheet

CSV_COLUMNS = (
    "invoice_id",
    "tenant",
    "billing_period_start",
    "billing_period_end",
    "state",
    "kind",
    "gpu_class",
    "description",
    "charge_period_start",
    "charge_period_end",
    "gpu_hours",
    "list_unit_price",
    "unit_price",
    "list_amount",
    "amount",
    "currency",
    "rate_card_version",
)
# FinOps FOCUS 1.2 (https://focus.finops.org/focus-specification/v1-2/), the columns gpucloud fills, in the
# specification's (alphabetical) order, then its own columns, prefixed `x_` as FOCUS requires. Left out, as
# their conditions do not hold for gpucloud: availability zones, billing account and sub-account types,
# capacity reservations, commitment discounts, and pricing in another currency than billing.
FOCUS_12 = (
    "BilledCost",
    "BillingAccountId",
    "BillingAccountName",
    "BillingCurrency",
    "BillingPeriodEnd",
    "BillingPeriodStart",
    "ChargeCategory",
    "ChargeClass",
    "ChargeDescription",
    "ChargeFrequency",
    "ChargePeriodEnd",
    "ChargePeriodStart",
    "ConsumedQuantity",
    "ConsumedUnit",
    "ContractedCost",
    "ContractedUnitPrice",
    "EffectiveCost",
    "InvoiceId",
    "InvoiceIssuerName",
    "ListCost",
    "ListUnitPrice",
    "PricingCategory",
    "PricingQuantity",
    "PricingUnit",
    "ProviderName",
    "PublisherName",
    "RegionId",
    "RegionName",
    "ResourceId",
    "ResourceName",
    "ResourceType",
    "ServiceCategory",
    "ServiceName",
    "ServiceSubcategory",
    "SkuId",
    "SkuMeter",
    "SkuPriceDetails",
    "SkuPriceId",
    "SubAccountId",
    "SubAccountName",
    "Tags",
    "x_RateCardVersion",
)
# The FOCUS 1.0 columns (`?focus_version=1.0`), for tools that read only 1.0: the same values, fewer columns.
FOCUS_10 = tuple(
    c
    for c in FOCUS_12
    if c not in ("InvoiceId", "ServiceSubcategory", "SkuMeter", "SkuPriceDetails", "x_RateCardVersion")
)
# The FOCUS features gpucloud offers (the specification's applicability criteria): what a validator checks
# the export against. Not offered: availability zones, capacity reservations, commitment discounts, several
# pricing categories or account types, and pricing in another (or a virtual) currency than billing.
FOCUS_APPLICABILITY = frozenset(
    {
        "USAGE_MEASUREMENT_SUPPORTED",  # metered GPU-seconds
        "UNIT_PRICING_SUPPORTED",  # a price per GPU-hour
        "PUBLIC_PRICE_LIST_SUPPORTED",  # rate cards, readable by everyone signed in
        "NEGOTIATED_PRICING_SUPPORTED",  # the trust tier's multiplier: ContractedUnitPrice ≠ ListUnitPrice
        "SUB_ACCOUNT_SUPPORTED",  # tenants
        "BILLING_BASED_ON_PROVISIONED_RESOURCES_SUPPORTED",  # each tenant's GPU class is a resource
        "RESOURCE_TYPE_ASSIGNMENT_SUPPORTED",
        "REGION_SUPPORTED",  # the host cluster's region
        "TAGGING_SUPPORTED",
    }
)
FOCUS_VERSIONS = {"1.2": FOCUS_12, "1.0": FOCUS_10}
FOCUS_VERSION = "1.2"
FOCUS_COLUMNS = FOCUS_12
PROVIDER = "gpucloud"
UNIT = "GPU-Hours"
SERVICE = ("AI and Machine Learning", "AI Platforms", "gpucloud GPU compute")  # category, subcategory, name


def _time(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _lines(invoices: Iterable[Invoice]) -> Iterable[tuple[Invoice, InvoiceLine]]:
    for invoice in invoices:
        for line in invoice.lines.all():
            yield invoice, line


def csv_rows(invoices: Iterable[Invoice]) -> Iterable[dict[str, str]]:
    for invoice, line in _lines(invoices):
        yield {
            "invoice_id": invoice.public_id,
            "tenant": invoice.tenant.slug,
            "billing_period_start": _time(invoice.period_start),
            "billing_period_end": _time(invoice.period_end),
            "state": invoice.state,
            "kind": line.kind,
            "gpu_class": line.gpu_class,
            "description": line.description,
            "charge_period_start": _time(line.charge_start),
            "charge_period_end": _time(line.charge_end),
            "gpu_hours": str(line.gpu_hours),
            "list_unit_price": str(line.list_unit_price),
            "unit_price": str(line.unit_price),
            "list_amount": str(line.list_amount),
            "amount": str(line.amount),
            "currency": line.currency,
            "rate_card_version": str(line.rate_card_version or ""),
        }


def focus_rows(invoices: Iterable[Invoice]) -> Iterable[dict[str, str]]:
    """One FOCUS 1.2 row per invoice line. Late usage is ChargeCategory Usage, ChargeClass Correction; a
    credit for time lost to a hardware fault is ChargeCategory Credit, One-Time, with a negative cost and no
    consumed quantity. An empty cell is FOCUS's null."""
    for invoice, line in _lines(invoices):
        credit = line.kind == InvoiceLine.Kind.CREDIT
        tenant = invoice.tenant
        cluster = getattr(tenant, "cluster", None)
        region = cluster.host_cluster.region if cluster else ""
        category, subcategory, service = SERVICE
        yield {
            "BilledCost": str(line.amount),
            "BillingAccountId": PROVIDER,
            "BillingAccountName": PROVIDER,
            "BillingCurrency": line.currency,
            "BillingPeriodEnd": _time(invoice.period_end),
            "BillingPeriodStart": _time(invoice.period_start),
            "ChargeCategory": "Credit" if credit else "Usage",
            "ChargeClass": "Correction" if line.kind == InvoiceLine.Kind.ADJUSTMENT else "",
            "ChargeDescription": line.description,
            "ChargeFrequency": "One-Time" if credit else "Usage-Based",
            "ChargePeriodEnd": _time(line.charge_end),
            "ChargePeriodStart": _time(line.charge_start),
            "ConsumedQuantity": "" if credit else str(line.gpu_hours),  # FOCUS: usage rows only
            "ConsumedUnit": "" if credit else UNIT,
            "ContractedCost": str(line.amount),
            "ContractedUnitPrice": str(line.unit_price),
            "EffectiveCost": str(line.amount),
            "InvoiceId": invoice.public_id,  # a draft is FOCUS's provisional invoice: it has its id already
            "InvoiceIssuerName": PROVIDER,
            "ListCost": str(line.list_amount),
            "ListUnitPrice": str(line.list_unit_price),
            "PricingCategory": "Standard",
            "PricingQuantity": str(line.gpu_hours),
            "PricingUnit": UNIT,
            "ProviderName": PROVIDER,
            "PublisherName": PROVIDER,
            "RegionId": region,
            "RegionName": region,
            "ResourceId": f"{tenant.public_id}/{line.gpu_class}",
            "ResourceName": f"{tenant.slug} {line.gpu_class}",
            "ResourceType": "GPU class",
            "ServiceCategory": category,
            "ServiceName": service,
            "ServiceSubcategory": subcategory,
            "SkuId": line.gpu_class,
            "SkuMeter": "GPU Usage",
            "SkuPriceDetails": json.dumps(sku_price_details(line.gpu_class), sort_keys=True),
            # One price of one SKU, the same over time and for every tenant (FOCUS keeps amounts, dates and
            # negotiated terms out of it): the version of the card is x_RateCardVersion.
            "SkuPriceId": f"{line.gpu_class}:gpu-hour",
            "SubAccountId": tenant.public_id,
            "SubAccountName": tenant.display_name,
            "Tags": json.dumps(
                {
                    "gpucloud.io/tenant": tenant.slug,
                    "gpucloud.io/trust-tier": invoice.trust_tier,
                    "gpucloud.io/invoice": invoice.public_id,
                },
                sort_keys=True,
            ),
            "x_RateCardVersion": str(line.rate_card_version or ""),
        }


def sku_price_details(gpu_class: str) -> dict[str, Any]:
    """What one GPU-hour of the class is: FOCUS's `GpuCount` for a whole GPU, and gpucloud's own `x_`
    properties (the GPU model; the MIG profile, or the share) for a part of one."""
    model, _, part = gpu_class.partition(".")
    details: dict[str, Any] = {"x_GpuModel": model}
    if not part:
        details["GpuCount"] = 1
    elif part.startswith("mig-"):
        details["x_MigProfile"] = part.removeprefix("mig-")
    else:
        details["x_Share"] = part  # "shared" (time-sliced) or "hami-<percent>"
    return details


def to_csv(columns: tuple[str, ...], rows: Iterable[dict[str, str]]) -> str:
    """The rows as CSV; text a spreadsheet would run as a formula is neutralised (`gpucloud.spreadsheet`)."""
    out = io.StringIO()
    # RFC 4180's CRLF: the writer then quotes a cell holding a lone CR too, which would otherwise end the row.
    writer = csv.DictWriter(out, fieldnames=columns, extrasaction="ignore")
    writer.writeheader()
    writer.writerows(spreadsheet.record(row) for row in rows)
    return out.getvalue()


def invoices_csv(invoices: Iterable[Invoice]) -> str:
    return to_csv(CSV_COLUMNS, csv_rows(invoices))


def invoices_focus(invoices: Iterable[Invoice], version: str = FOCUS_VERSION) -> str:
    """FOCUS 1.2 rows, or with `version="1.0"` the FOCUS 1.0 columns of the same rows."""
    return to_csv(FOCUS_VERSIONS[version], focus_rows(invoices))
