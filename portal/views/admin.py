"""Platform administrators' lists: `/rate-cards/`, `/audit/` (every event), `/host-clusters/`."""

from __future__ import annotations

from datetime import UTC, datetime, time
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from billing.models import RateCard
from billing.services import rates
from gpucloud.errors import ServiceError, ValidationFailed
from portal.forms import RateCardForm
from portal.scoping import actor_of, form_errors
from portal.views.audit import filtered
from portal.views.fleet import require_platform_admin
from scheduling.models import HostCluster
from tenants.models import AuditEvent

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
    cards = RateCard.objects.order_by("-effective_from", "-version")
    context = {
        "nav": "rate-cards",
        "form": form,
        "page": Paginator(cards, PER_PAGE).get_page(request.GET.get("page")),
    }
    return render(request, "portal/admin/rate_cards.html", context)


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
    events = AuditEvent.objects.select_related("tenant").order_by("-created_at", "-id")
    context: dict[str, Any] = {"nav": "audit", **filtered(request, events)}
    return render(request, "portal/admin/audit.html", context)


@login_required
def host_clusters(request: HttpRequest) -> HttpResponse:
    require_platform_admin(request, "the host clusters page")
    clusters = HostCluster.objects.annotate(
        node_count=Count("nodes", distinct=True),
        gpu_count=Count("nodes__gpus", distinct=True),
        tenant_count=Count("tenant_clusters", distinct=True),
    ).order_by("name")
    return render(request, "portal/admin/host_clusters.html", {"nav": "host-clusters", "clusters": clusters})
