"""Invoices: the ledger rated against the rate cards in force; a draft is recomputed until it is issued, and
late usage becomes an adjustment on the next invoice. Export downloads are audited here too.
"""

from __future__ import annotations

import calendar
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from django.db import connection, transaction
from django.db.models import Max, Sum
from django.utils import timezone

from billing.models import (
    MICRO,
    HealthCredit,
    Invoice,
    InvoiceLine,
    RateCard,
    UsageEntry,
)
from billing.services.rates import CENT, card_at, cards_in_force, multiplier_of, price_of
from core import audit
from core.audit import Actor
from gpucloud.errors import Conflict, PermissionDenied, ValidationFailed
from tenants.models import Tenant
from tenants.services.roles import require

HOUR = Decimal(3600)


FIRST_MONTH, LAST_MONTH = (2000, 1), (2999, 12)  # the months an invoice can be for


def month_bounds(year: int, month: int) -> tuple[datetime, datetime]:
    """The first moment of the month and of the next one; refuses months outside FIRST_MONTH…LAST_MONTH
    (Python's dates end in 9999, and no usage was ever metered before 2000)."""
    if not (FIRST_MONTH <= (year, month) <= LAST_MONTH and 1 <= month <= 12):
        first, last = (f"{y:04d}-{m:02d}" for y, m in (FIRST_MONTH, LAST_MONTH))
        raise ValidationFailed.on(
            "month", f"{year:04d}-{month:02d} is not a month from {first} to {last} (YYYY-MM)"
        )
    start = datetime(year, month, 1, tzinfo=UTC)
    return start, start + timedelta(days=calendar.monthrange(year, month)[1])


@dataclass
class _Charge:
    gpu_class: str
    card: RateCard | None
    start: datetime
    end: datetime
    gpu_us: int = 0


def rate(tenant: Tenant, rows: Iterable[tuple[str, datetime, int]], kind: str) -> list[InvoiceLine]:
    """Rate ledger sums (class, hour, micro GPU-seconds) into lines: one per class per card in force."""
    rows = list(rows)
    if not rows:
        return []
    hours = [hour for _, hour, _ in rows]
    cards = cards_in_force(min(hours), max(hours) + timedelta(hours=1))
    charges: dict[tuple[str, int | None], _Charge] = {}
    for gpu_class, hour, gpu_us in rows:
        card = card_at(cards, hour)
        key = (gpu_class, card.version if card else None)
        charge = charges.setdefault(key, _Charge(gpu_class, card, hour, hour + timedelta(hours=1)))
        charge.start, charge.end = min(charge.start, hour), max(charge.end, hour + timedelta(hours=1))
        charge.gpu_us += gpu_us
    return [
        _line(tenant, c, kind) for _, c in sorted(charges.items(), key=lambda kv: (kv[0][0], kv[1].start))
    ]


def _line(tenant: Tenant, charge: _Charge, kind: str) -> InvoiceLine:
    gpu_hours = Decimal(charge.gpu_us) / MICRO / HOUR
    card = charge.card
    list_price = price_of(card, charge.gpu_class) if card else None
    unpriced = list_price is None
    list_price = list_price or Decimal(0)
    unit_price = list_price * (multiplier_of(card, tenant.trust_tier) if card else Decimal(1))
    what = "late usage of earlier months" if kind == InvoiceLine.Kind.ADJUSTMENT else "usage"
    price_note = "no price on the rate card" if unpriced else f"rate card v{card.version}" if card else ""
    return InvoiceLine(
        kind=kind,
        gpu_class=charge.gpu_class,
        description=f"{charge.gpu_class} {what}, {price_note}".rstrip(", "),
        charge_start=charge.start,
        charge_end=charge.end,
        gpu_hours=gpu_hours.quantize(Decimal("0.000001"), ROUND_HALF_UP),
        list_unit_price=list_price.quantize(Decimal("0.000001"), ROUND_HALF_UP),
        unit_price=unit_price.quantize(Decimal("0.000001"), ROUND_HALF_UP),
        list_amount=(gpu_hours * list_price).quantize(CENT, ROUND_HALF_UP),
        amount=(gpu_hours * unit_price).quantize(CENT, ROUND_HALF_UP),
        currency=card.currency if card else "USD",
        rate_card_version=card.version if card else None,
    )


def _usage_by_class_hour(tenant: Tenant, **filters: Any) -> list[tuple[str, datetime, int]]:
    rows = (
        UsageEntry.objects.filter(tenant=tenant, **filters)
        .values("gpu_class", "hour")
        .annotate(gpu_us=Sum("gpu_us"))
        .order_by("gpu_class", "hour")
    )
    return [(r["gpu_class"], r["hour"], r["gpu_us"]) for r in rows]


def _issued_watermark(tenant: Tenant) -> int:
    return (
        Invoice.objects.filter(tenant=tenant, state=Invoice.State.ISSUED).aggregate(
            w=Max("ledger_watermark")
        )["w"]
        or 0
    )


def open_credits(invoice: Invoice) -> Any:
    """The tenant's credits for lost time not carried by an issued invoice yet, up to the invoice's month."""
    return HealthCredit.objects.filter(
        tenant=invoice.tenant, invoice__isnull=True, lost_from__lt=invoice.period_end
    ).select_related("event", "event__node")


def _credit_line(tenant: Tenant, credit: HealthCredit) -> InvoiceLine:
    """A credit for time lost to a hardware fault, at the price of the class it held when the fault came."""
    gpu_hours = Decimal(credit.gpu_us) / MICRO / HOUR
    card = card_at(
        cards_in_force(credit.lost_from, credit.lost_from + timedelta(seconds=1)), credit.lost_from
    )
    list_price = (price_of(card, credit.gpu_class) if card else None) or Decimal(0)
    unit_price = list_price * (multiplier_of(card, tenant.trust_tier) if card else Decimal(1))
    event = credit.event
    hours = gpu_hours.quantize(Decimal("0.01"), ROUND_HALF_UP)
    cause = f"health event {event.public_id} ({event.signal} {event.value})" if event else "a health event"
    description = (
        f"credit {credit.public_id}: {hours} GPU-hours lost by {credit.namespace}/{credit.pod} on GPU "
        f"{credit.gpu_uuid} ({credit.node}) to {cause}"
    )
    return InvoiceLine(
        kind=InvoiceLine.Kind.CREDIT,
        gpu_class=credit.gpu_class,
        description=description[:300],
        charge_start=credit.lost_from,
        charge_end=credit.lost_until,
        gpu_hours=gpu_hours.quantize(Decimal("0.000001"), ROUND_HALF_UP),
        list_unit_price=list_price.quantize(Decimal("0.000001"), ROUND_HALF_UP),
        unit_price=unit_price.quantize(Decimal("0.000001"), ROUND_HALF_UP),
        list_amount=-(gpu_hours * list_price).quantize(CENT, ROUND_HALF_UP),
        amount=-(gpu_hours * unit_price).quantize(CENT, ROUND_HALF_UP),
        currency=card.currency if card else "USD",
        rate_card_version=card.version if card else None,
    )


def _lines_for(invoice: Invoice, watermark: int, credits: Iterable[HealthCredit] = ()) -> list[InvoiceLine]:
    """Usage of the month up to the watermark, late usage of issued months not billed yet, and the credits
    for time lost to hardware faults not yet on an issued invoice."""
    tenant = invoice.tenant
    usage = _usage_by_class_hour(
        tenant, hour__gte=invoice.period_start, hour__lt=invoice.period_end, id__lte=watermark
    )
    issued_periods = Invoice.objects.filter(
        tenant=tenant, state=Invoice.State.ISSUED, period_start__lt=invoice.period_start
    ).values_list("period_start", "period_end")
    late: list[tuple[str, datetime, int]] = []
    for start, end in issued_periods:
        late += _usage_by_class_hour(
            tenant, hour__gte=start, hour__lt=end, id__gt=_issued_watermark(tenant), id__lte=watermark
        )
    lines = rate(tenant, usage, InvoiceLine.Kind.USAGE) + rate(tenant, late, InvoiceLine.Kind.ADJUSTMENT)
    lines += [_credit_line(tenant, credit) for credit in credits]
    currencies = {line.currency for line in lines}
    if len(currencies) > 1:
        raise Conflict(
            f"the rate cards of this month use several currencies ({', '.join(sorted(currencies))})"
        )
    return lines


def _ledger_head(*, settled: bool = False) -> int:
    """The last ledger row; with `settled`, once every ingest in flight has committed (for an issue).

    Row ids are taken before commit, so without the lock a row with a smaller id could commit after the
    watermark was read and fall between the invoice and its adjustment. SHARE mode waits for the writers in
    flight and holds new ones back until this transaction ends (an issue is a short transaction).
    """
    if settled and connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(f"LOCK TABLE {UsageEntry._meta.db_table} IN SHARE MODE")
    return UsageEntry.objects.aggregate(m=Max("id"))["m"] or 0


def _fill(invoice: Invoice, watermark: int, credits: Iterable[HealthCredit] = ()) -> Invoice:
    lines = _lines_for(invoice, watermark, credits)
    invoice.lines.all().delete()
    for line in lines:
        line.invoice = invoice
    InvoiceLine.objects.bulk_create(lines)
    invoice.total = sum((line.amount for line in lines), Decimal(0))
    invoice.currency = lines[0].currency if lines else invoice.currency
    invoice.trust_tier = invoice.tenant.trust_tier
    invoice.ledger_watermark = watermark
    invoice.save()
    return invoice


@transaction.atomic
def draft_invoice(*, actor: Actor, tenant: Tenant, year: int, month: int) -> Invoice:
    """The tenant's invoice for a month, recomputed from the ledger while it is a draft."""
    require(actor, tenant, "billing.view", "reading invoices")
    start, end = month_bounds(year, month)
    invoice, created = Invoice.objects.select_for_update().get_or_create(
        tenant=tenant, period_start=start, defaults={"period_end": end, "trust_tier": tenant.trust_tier}
    )
    if invoice.state == Invoice.State.ISSUED:
        return invoice
    before = None if created else {"total": str(invoice.total), "currency": invoice.currency}
    invoice = _fill(invoice, _ledger_head(), list(open_credits(invoice)))
    audit.record(
        actor,
        "invoice.draft",
        object_type="invoice",
        object_id=invoice.public_id,
        tenant=tenant,
        before=before,
        after={"total": str(invoice.total), "currency": invoice.currency, "period": f"{start:%Y-%m}"},
    )
    return invoice


@transaction.atomic
def issue_invoice(*, actor: Actor, invoice: Invoice) -> Invoice:
    """Freeze a draft: recompute it from the ledger one last time and mark it issued. Platform admins only.

    Usage of this month written afterwards is late and goes on the tenant's next invoice as an adjustment.
    Invoices are issued month by month: an earlier draft must be issued first.
    """
    if not actor.is_platform_admin:
        raise PermissionDenied("invoices are issued by platform administrators only")
    invoice = Invoice.objects.select_for_update().select_related("tenant").get(pk=invoice.pk)
    if invoice.state == Invoice.State.ISSUED:
        raise Conflict(f"invoice {invoice.public_id} is already issued and cannot change")
    earlier = Invoice.objects.filter(
        tenant=invoice.tenant, state=Invoice.State.DRAFT, period_start__lt=invoice.period_start
    ).first()
    if earlier is not None:
        raise Conflict(f"issue the earlier invoice {earlier.public_id} ({earlier.period_start:%Y-%m}) first")
    # The credits are locked and tied to this invoice in its transaction: a credit goes on one issued invoice.
    credits = list(open_credits(invoice).select_for_update(of=("self",)))
    before = {"state": invoice.state, "total": str(invoice.total), "currency": invoice.currency}
    _fill(invoice, _ledger_head(settled=True), credits)
    HealthCredit.objects.filter(pk__in=[c.pk for c in credits]).update(invoice=invoice)
    invoice.state, invoice.issued_at = Invoice.State.ISSUED, timezone.now()
    invoice.save(update_fields=["state", "issued_at"])
    audit.record(
        actor,
        "invoice.issue",
        object_type="invoice",
        object_id=invoice.public_id,
        tenant=invoice.tenant,
        before=before,
        after={
            "state": invoice.state,
            "total": str(invoice.total),
            "currency": invoice.currency,
            "period": f"{invoice.period_start:%Y-%m}",
            "lines": invoice.lines.count(),
        },
    )
    return invoice


def record_export(*, actor: Actor, tenant: Tenant | None, what: str, object_id: str) -> None:
    """Every export download is audited: who took which bill out of the system."""
    audit.record(
        actor,
        "billing.export",
        object_type="export",
        object_id=object_id,
        tenant=tenant,
        after={"format": what},
    )
