"""What a workload would cost on the tenant's rate card: the feasibility check's price (docs/api.md,
`POST /api/v1/tenants/{slug}/feasibility/`). Nothing is written."""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.utils import timezone

from billing.services.rates import CENT, card_at, cards_in_force, multiplier_of, price_of
from fleet.models import GpuClass
from placement.service import MILLI, unit_milli
from tenants.models import Tenant


def quote(
    tenant: Tenant, gpu_class: GpuClass, count: int, hours: float, at: datetime | None = None
) -> dict[str, Any] | None:
    """Price per unit-hour and in total of `count` units for `hours` hours on the card in force at `at`
    (default now), with the tenant's trust-tier multiplier, as invoicing rates it; None if no card prices it.

    A unit of a shared or HAMi class is billed as its share of a GPU (invoicing meters GPU-hours)."""
    moment = at or timezone.now()
    card = card_at(cards_in_force(moment, moment + timedelta(seconds=1)), moment)
    if card is None:
        return None
    list_price = price_of(card, gpu_class.name)
    if list_price is None:
        return None
    per_unit = list_price * multiplier_of(card, tenant.trust_tier)
    if gpu_class.kind in (GpuClass.Kind.SHARED, GpuClass.Kind.FRACTION):
        per_unit = per_unit * unit_milli(gpu_class) / MILLI
    total = (per_unit * count * Decimal(str(hours))).quantize(CENT)
    return {
        "per_unit_hour": str(per_unit.quantize(Decimal("0.000001"))),
        "total": str(total),
        "currency": card.currency,
        "rate_card_version": card.version,
    }
