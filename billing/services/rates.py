"""Rate cards: versioned list prices per GPU class, trust-tier multipliers, the card in force at a time."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Any

from django.db import transaction
from django.db.models import Max

from billing.models import (
    RateCard,
)
from gpucloud.errors import PermissionDenied, ValidationFailed
from scheduling import catalog
from tenants import audit
from tenants.audit import Actor
from tenants.declared import refuse_undone_edit
from tenants.models import Tenant

CENT = Decimal("0.01")


def decimal_of(value: Any, where: str) -> Decimal:
    try:
        number = Decimal(str(value))
    except InvalidOperation:
        raise ValidationFailed.on(where, f"{value!r} is not a decimal number") from None
    if not number.is_finite() or number < 0:
        raise ValidationFailed.on(where, f"{value!r} must be a finite number of at least 0")
    return number


def _validate_prices(prices: Mapping[str, Any], tiers: Mapping[str, Any]) -> None:
    if not prices:
        raise ValidationFailed.on(
            "prices", "a rate card needs at least one price: {gpu class: price per GPU-hour}"
        )
    known = {c.name for c in catalog.all_classes()}
    for name, price in prices.items():
        if name not in known:
            raise ValidationFailed.on(
                f"prices.{name}",
                f"{name!r} is not a GPU class; classes look like h100-80gb, "
                "h100-80gb.mig-1g.10gb or h100-80gb.shared",
            )
        decimal_of(price, f"prices.{name}")
    for tier, multiplier in tiers.items():
        if tier not in Tenant.TrustTier.values:
            raise ValidationFailed.on(
                f"tier_multipliers.{tier}",
                f"{tier!r} is not a trust tier: {', '.join(Tenant.TrustTier.values)}",
            )
        decimal_of(multiplier, f"tier_multipliers.{tier}")


@transaction.atomic
def create_rate_card(
    *,
    actor: Actor,
    effective_from: datetime,
    prices: Mapping[str, Any],
    currency: str = "USD",
    tier_multipliers: Mapping[str, Any] | None = None,
    note: str = "",
    name: str = "",
) -> RateCard:
    """A new rate card version, in force from `effective_from`. Platform administrators only.

    Cards are never edited: a price change is a new version. Issued invoices keep the prices they had.
    """
    if not actor.is_platform_admin:
        raise PermissionDenied("rate cards are written by platform administrators only")
    if name:
        refuse_undone_edit(actor, "RateCard", name, None, f"a new version of rate card {name}")
    tiers = dict(tier_multipliers or {})
    _validate_prices(prices, tiers)
    if len(currency) != 3 or not currency.isalpha():
        raise ValidationFailed.on("currency", f"{currency!r} is not an ISO 4217 code such as USD or EUR")
    version = (RateCard.objects.select_for_update().aggregate(v=Max("version"))["v"] or 0) + 1
    card = RateCard.objects.create(
        version=version,
        currency=currency.upper(),
        effective_from=effective_from,
        prices={k: str(decimal_of(v, k)) for k, v in prices.items()},
        tier_multipliers={k: str(decimal_of(v, k)) for k, v in tiers.items()},
        note=note,
        name=name,
    )
    audit.record(
        actor,
        "rate_card.create",
        object_type="rate_card",
        object_id=card.public_id,
        after={
            "version": version,
            "effective_from": effective_from.isoformat(),
            "prices": card.prices,
            "tier_multipliers": card.tier_multipliers,
            "currency": card.currency,
            **({"name": name} if name else {}),
        },
    )
    return card


def price_of(card: RateCard, gpu_class: str) -> Decimal | None:
    """Price per GPU-hour of a class on a card: its own, else derived from its model's whole-GPU price."""
    if gpu_class in card.prices:
        return Decimal(card.prices[gpu_class])
    model_slug, _, rest = gpu_class.partition(".")
    whole = card.prices.get(model_slug)
    if whole is None:
        return None
    if rest == "shared" or catalog.hami_percent(gpu_class):
        return Decimal(whole)  # a share's usage is already its fraction of a GPU
    if rest.startswith("mig-"):
        fraction = _mig_fraction(model_slug, rest.removeprefix("mig-"))
        return None if fraction is None else Decimal(whole) * fraction.numerator / fraction.denominator
    return None


def _mig_fraction(model_slug: str, profile: str) -> Fraction | None:
    model = catalog.model_by_slug(model_slug)
    spec = next((p for p in model.mig_profiles if p.name == profile), None) if model else None
    return Fraction(spec.compute_slices, catalog.COMPUTE_SLICES) if spec else None


def multiplier_of(card: RateCard, tier: str) -> Decimal:
    return Decimal(card.tier_multipliers.get(tier, "1"))


def cards_in_force(start: datetime, end: datetime) -> list[RateCard]:
    """Cards that apply somewhere in [start, end), oldest first."""
    cards = list(RateCard.objects.filter(effective_from__lt=end).order_by("effective_from", "version"))
    before = [c for c in cards if c.effective_from <= start]
    return ([before[-1]] if before else []) + [c for c in cards if c.effective_from > start]


def card_at(cards: list[RateCard], moment: datetime) -> RateCard | None:
    current = None
    for card in cards:
        if card.effective_from <= moment:
            current = card
    return current
