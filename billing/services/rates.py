"""Rate cards: versioned list prices per GPU class, trust-tier multipliers, the card in force at a time."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from decimal import Decimal
from fractions import Fraction
from typing import Any

from django.db import transaction
from django.db.models import Max, QuerySet
from django.utils import timezone

from billing import money
from billing.models import Invoice, InvoiceLine, RateCard
from core import audit
from core.audit import Actor
from core.declared import refuse_undone_edit
from core.models import AuditEvent
from fleet import catalog
from gpucloud.errors import Conflict, PermissionDenied, ValidationFailed
from gpucloud.transactions import serialise
from tenants.models import Tenant

CENT = Decimal("0.01")


class RateCardInUse(Conflict):
    """A card an issued invoice priced with cannot be deleted (the invoice names it); it can be retired."""

    type = "rate-card-in-use"
    title = "Issued invoices used this rate card"


def _validate_prices(
    prices: Mapping[str, Any], tiers: Mapping[str, Any]
) -> tuple[dict[str, str], dict[str, str]]:
    """The prices and multipliers as decimal strings, each within its money type's bounds."""
    if not prices:
        raise ValidationFailed.on(
            "prices", "a rate card needs at least one price: {gpu class: price per GPU-hour}"
        )
    known = {c.name for c in catalog.all_classes()}
    for name in prices:
        if name not in known:
            raise ValidationFailed.on(
                f"prices.{name}",
                f"{name!r} is not a GPU class; classes look like h100-80gb, "
                "h100-80gb.mig-1g.10gb or h100-80gb.shared",
            )
    for tier in tiers:
        if tier not in Tenant.TrustTier.values:
            raise ValidationFailed.on(
                f"tier_multipliers.{tier}",
                f"{tier!r} is not a trust tier: {', '.join(Tenant.TrustTier.values)}",
            )
    return (
        {k: str(money.PRICE.parse(v, f"prices.{k}")) for k, v in prices.items()},
        {k: str(money.MULTIPLIER.parse(v, f"tier_multipliers.{k}")) for k, v in tiers.items()},
    )


def _next_version() -> int:
    """One more than any version ever given: a deleted card's number stays taken (its deletion's audit row
    keeps it), so "v7" never names two cards. Two cards made at once wait for each other here, so they never
    read the same maximum (a unique-version 409 for the second, before)."""
    serialise("rate-card-version")
    cards = RateCard.objects.aggregate(v=Max("version"))["v"] or 0
    deleted = AuditEvent.objects.filter(action="rate_card.delete").values_list("before__version", flat=True)
    return max([cards, *(v for v in deleted if isinstance(v, int))]) + 1


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
    _require_admin(actor)
    if name:
        refuse_undone_edit(actor, "RateCard", name, None, f"a new version of rate card {name}")
    checked_prices, checked_tiers = _validate_prices(prices, dict(tier_multipliers or {}))
    if len(currency) != 3 or not currency.isalpha():
        raise ValidationFailed.on("currency", f"{currency!r} is not an ISO 4217 code such as USD or EUR")
    version = _next_version()
    card = RateCard.objects.create(
        version=version,
        currency=currency.upper(),
        effective_from=effective_from,
        prices=checked_prices,
        tier_multipliers=checked_tiers,
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


def _require_admin(actor: Actor) -> None:
    if not actor.is_platform_admin:
        raise PermissionDenied("rate cards are written by platform administrators only")


def _summary(card: RateCard) -> dict[str, Any]:
    return {
        "version": card.version,
        "effective_from": card.effective_from.isoformat(),
        "effective_until": card.effective_until.isoformat() if card.effective_until else None,
        "prices": card.prices,
        "tier_multipliers": card.tier_multipliers,
        "currency": card.currency,
        **({"name": card.name} if card.name else {}),
    }


def issued_with(card: RateCard) -> QuerySet[Invoice]:
    """Issued invoices that carry a line at this card's prices: they keep them, so the card must stay."""
    return Invoice.objects.filter(
        state=Invoice.State.ISSUED, lines__rate_card_version=card.version
    ).distinct()


def versions_in_use() -> set[int]:
    """The versions `issued_with` finds an issued invoice for, for every card at once (one query)."""
    lines = InvoiceLine.objects.filter(invoice__state=Invoice.State.ISSUED)
    versions = lines.values_list("rate_card_version", flat=True).distinct()
    return {version for version in versions if version is not None}


@transaction.atomic
def delete_rate_card(*, actor: Actor, card: RateCard) -> None:
    """Delete a card no issued invoice used (a mistake, a card that never applied). Platform administrators.

    Drafts that used it are recomputed at the cards left, as after any new version. A used card is retired
    instead (`retire_rate_card`): issued invoices name its version and keep its prices.
    """
    _require_admin(actor)
    card = RateCard.objects.select_for_update().get(pk=card.pk)
    used = issued_with(card).order_by("period_start").first()
    if used is not None:
        raise RateCardInUse(
            f"rate card v{card.version} priced issued invoice {used.public_id} ({used.period_start:%Y-%m}), "
            "so it stays; retire it instead (an end date from which it no longer applies)"
        )
    before = _summary(card)
    card.delete()
    audit.record(actor, "rate_card.delete", object_type="rate_card", object_id=card.public_id, before=before)


@transaction.atomic
def retire_rate_card(*, actor: Actor, card: RateCard, effective_until: datetime | None = None) -> RateCard:
    """End a card: from `effective_until` it no longer applies, and the card that would be in force without it
    does. Platform administrators. The end cannot fall before the card began, nor before the end of a month an
    issued invoice priced with it (issued invoices keep their prices, and late usage of those months is rated
    at the same cards); left out, it is now, or the end of that month if later."""
    _require_admin(actor)
    card = RateCard.objects.select_for_update().get(pk=card.pk)
    last = issued_with(card).aggregate(end=Max("period_end"))["end"]
    until = effective_until or max(timezone.now(), last or timezone.now())
    if until.tzinfo is None:
        raise ValidationFailed.on("effective_until", "the end needs a time zone (add Z or +00:00)")
    if until < card.effective_from:
        raise ValidationFailed.on(
            "effective_until",
            f"rate card v{card.version} is in force from {card.effective_from.isoformat()}; it cannot end "
            f"before it began ({until.isoformat()}); delete it instead if no issued invoice used it",
        )
    if last is not None and until < last:
        raise ValidationFailed.on(
            "effective_until",
            f"rate card v{card.version} priced invoices issued up to {last.isoformat()}; it can end at "
            "that moment or later, not before",
        )
    before = _summary(card)
    card.effective_until = until
    card.save(update_fields=["effective_until"])
    audit.record(
        actor,
        "rate_card.retire",
        object_type="rate_card",
        object_id=card.public_id,
        before=before,
        after=_summary(card),
    )
    return card


@transaction.atomic
def withdraw_rate_card(*, actor: Actor, card: RateCard) -> RateCard | None:
    """What destroying a declared card means (Terraform's destroy, a GitOps prune): delete it if no issued
    invoice used it, else retire it (`retire_rate_card`'s default end) unless it has ended already. Returns
    the retired card, or None once deleted."""
    if not issued_with(card).exists():
        delete_rate_card(actor=actor, card=card)
        return None
    if card.effective_until is not None and card.effective_until <= timezone.now():
        return card  # ended already: nothing to change
    return retire_rate_card(actor=actor, card=card)


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
    """Cards that may apply somewhere in [start, end), oldest first (a retired card stops at its end, and
    an earlier card can apply again after it)."""
    return list(
        RateCard.objects.filter(effective_from__lt=end)
        .exclude(effective_until__lte=start)
        .order_by("effective_from", "version")
    )


def card_at(cards: list[RateCard], moment: datetime) -> RateCard | None:
    """The card in force at `moment`: the latest that began by then and has not ended."""
    current = None
    for card in cards:
        if card.in_force_at(moment):
            current = card
    return current
