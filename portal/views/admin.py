"""Platform administrators' lists: `/rate-cards/` (with deleting and retiring a card), `/audit/` (every
event), `/host-clusters/`."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, time
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from billing import selectors as billing_selectors
from billing.models import RateCard
from billing.services import rates
from fleet.models import HostCluster
from fleet.selectors import host_clusters_counted
from gpucloud.errors import ServiceError, ValidationFailed
from portal.forms import (
    CordonForm,
    DrainForm,
    HostClusterUpdateForm,
    RateCardForm,
    RetireForm,
    RetireRateCardForm,
)
from portal.scoping import actor_of, form_errors
from portal.views.audit import filtered
from portal.views.fleet import require_platform_admin
from tenants.selectors import audit_events

PER_PAGE = 50


def pairs(text: str, field: str) -> dict[str, str]:
    """`name = value` lines (or `name=value`, comma-separated) as a mapping; the values stay text for the
    service to read as decimals, with its own messages."""
    found: dict[str, str] = {}
    for part in text.replace(",", "\n").splitlines():
        if not part.strip():
            continue
        name, sep, value = part.partition("=")
        if not sep or not name.strip():
            raise ValidationFailed.on(field, f"{part.strip()!r} is not written name = value")
        found[name.strip()] = value.strip()
    return found


@login_required
def rate_cards(request: HttpRequest) -> HttpResponse:
    require_platform_admin(request, "the rate cards page")
    form = RateCardForm(request.POST or None)
    if request.method == "POST" and form.is_valid() and _create(request, form):
        return redirect("portal:rate-cards")
    cards = billing_selectors.rate_cards()
    context = {
        "nav": "rate-cards",
        "form": form,
        "retire_form": RetireRateCardForm(auto_id=False),  # one per row: no ids to repeat
        "page": Paginator(cards, PER_PAGE).get_page(request.GET.get("page")),
        "used": rates.versions_in_use(),
    }
    return render(request, "portal/admin/rate_cards.html", context)


@login_required
@require_POST
def rate_card_delete(request: HttpRequest, card_id: str) -> HttpResponse:
    """As DELETE /api/v1/rate-cards/{id}/: only a card no issued invoice used."""
    require_platform_admin(request, "deleting a rate card")
    card = get_object_or_404(RateCard, public_id=card_id)
    try:
        rates.delete_rate_card(actor=actor_of(request), card=card)
    except ServiceError as error:
        messages.error(request, error.detail)
    else:
        messages.success(request, f"Rate card v{card.version} deleted.")
    return redirect("portal:rate-cards")


@login_required
@require_POST
def rate_card_retire(request: HttpRequest, card_id: str) -> HttpResponse:
    """As POST /api/v1/rate-cards/{id}/retire/: the card no longer applies from the day given (or now)."""
    require_platform_admin(request, "retiring a rate card")
    card = get_object_or_404(RateCard, public_id=card_id)
    form = RetireRateCardForm(request.POST)
    if not form.is_valid():
        messages.error(request, "; ".join(str(e) for errors in form.errors.values() for e in errors))
        return redirect("portal:rate-cards")
    day = form.cleaned_data["effective_until"]
    try:
        card = rates.retire_rate_card(
            actor=actor_of(request),
            card=card,
            effective_until=datetime.combine(day, time(), UTC) if day else None,
        )
    except ServiceError as error:
        messages.error(request, error.detail)
    else:
        assert card.effective_until is not None
        messages.success(
            request,
            f"Rate card v{card.version} no longer applies from {card.effective_until:%Y-%m-%d %H:%M} UTC.",
        )
    return redirect("portal:rate-cards")


def _create(request: HttpRequest, form: RateCardForm) -> bool:
    data = form.cleaned_data
    try:
        card = rates.create_rate_card(
            actor=actor_of(request),
            effective_from=datetime.combine(data["effective_from"], time(), UTC),
            prices=pairs(data["prices"], "prices"),
            currency=data["currency"].strip() or "USD",
            tier_multipliers=pairs(data["tier_multipliers"], "tier_multipliers"),
            note=data["note"],
        )
    except ServiceError as error:
        form_errors(form, error)
        return False
    messages.success(request, f"Rate card v{card.version} is in force from {card.effective_from:%Y-%m-%d}.")
    return True


@login_required
def audit_log(request: HttpRequest) -> HttpResponse:
    require_platform_admin(request, "the audit log of every tenant")
    events = audit_events()
    context: dict[str, Any] = {"nav": "audit", **filtered(request, events)}
    return render(request, "portal/admin/audit.html", context)


@login_required
def host_clusters(request: HttpRequest) -> HttpResponse:
    require_platform_admin(request, "the host clusters page")
    # Forms of their own per cluster: the cluster's name prefixes their fields, so no id repeats on the page.
    clusters = [
        ClusterForms(
            hc,
            HostClusterUpdateForm(prefix=hc.name, initial={"watch_tenants": hc.tenants_namespace}),
            CordonForm(prefix=hc.name),
            DrainForm(prefix=hc.name, exclude=hc.name),
            RetireForm(prefix=hc.name),
        )
        for hc in host_clusters_counted()
    ]
    return render(request, "portal/admin/host_clusters.html", {"nav": "host-clusters", "clusters": clusters})


@dataclass(frozen=True)
class ClusterForms:
    """A host cluster on its page, with the forms that change it (portal/views/host_clusters.py)."""

    hc: HostCluster
    update_form: HostClusterUpdateForm
    cordon_form: CordonForm
    drain_form: DrainForm
    retire_form: RetireForm
