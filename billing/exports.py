"""Invoices as CSV and as FinOps FOCUS 1.0 rows, for finance tools. Formatting only: no writes here."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable
from datetime import datetime

from billing.models import Invoice, InvoiceLine

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
# FOCUS 1.0 columns gpucloud fills (https://focus.finops.org/focus-specification/v1-0/).
FOCUS_COLUMNS = (
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
    "SkuId",
    "SkuPriceId",
    "SubAccountId",
    "SubAccountName",
    "Tags",
)
PROVIDER = "gpucloud"
UNIT = "GPU-Hours"


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
    """One FOCUS row per invoice line. Late usage is ChargeCategory Usage, ChargeClass Correction; a credit
    for time lost to a hardware fault is ChargeCategory Credit, One-Time, with a negative cost."""
    for invoice, line in _lines(invoices):
        credit = line.kind == InvoiceLine.Kind.CREDIT
        tenant = invoice.tenant
        cluster = getattr(tenant, "cluster", None)
        region = cluster.host_cluster.region if cluster else ""
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
            "ServiceCategory": "AI and Machine Learning",
            "ServiceName": "gpucloud GPU compute",
            "SkuId": line.gpu_class,
            "SkuPriceId": f"v{line.rate_card_version}:{line.gpu_class}" if line.rate_card_version else "",
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
        }


def to_csv(columns: tuple[str, ...], rows: Iterable[dict[str, str]]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def invoices_csv(invoices: Iterable[Invoice]) -> str:
    return to_csv(CSV_COLUMNS, csv_rows(invoices))


def invoices_focus(invoices: Iterable[Invoice]) -> str:
    return to_csv(FOCUS_COLUMNS, focus_rows(invoices))
