"""`/tenants/<slug>/audit/`: the tenant's audit events, filterable, newest first, paginated."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta
from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.http import urlencode

from core.models import AuditEvent
from portal.forms import AuditFilterForm
from portal.scoping import tenant_for
from tenants.selectors import audit_events

PER_PAGE = 50


def filtered(request: HttpRequest, events: QuerySet[AuditEvent], **export: str) -> dict[str, Any]:
    """The filter form, the page of matching events, and the API export's query for the same filters."""
    form = AuditFilterForm(request.GET or None)
    query = dict(export)
    if form.is_valid():
        data = form.cleaned_data
        if data["actor"]:
            events = events.filter(actor_label__icontains=data["actor"])
        if data["action"]:
            events = events.filter(action=data["action"])  # exact, as the API filters it
            query["action"] = data["action"]
        if data["tenant"]:
            events = events.filter(tenant__slug=data["tenant"])
            query["tenant"] = data["tenant"]
        if data["since"]:
            since = datetime.combine(data["since"], time(), UTC)
            events = events.filter(created_at__gte=since)
            query["since"] = since.isoformat()
        if data["until"]:
            until = datetime.combine(data["until"] + timedelta(days=1), time(), UTC)
            events = events.filter(created_at__lt=until)
            query["until"] = until.isoformat()
    return {
        "form": form,
        "page": Paginator(events, PER_PAGE).get_page(request.GET.get("page")),
        "query": urlencode([(k, str(v)) for k, v in request.GET.items() if k != "page"]),
        # The API's export takes the same filters (an exact actor only, so the actor is left to the page).
        "export": urlencode(query),
    }


@login_required
def tenant_audit(request: HttpRequest, slug: str) -> HttpResponse:
    tenant = tenant_for(request, slug, "audit.view")
    events = audit_events(tenant)
    context = {"tenant": tenant, "tab": "audit", **filtered(request, events, tenant=tenant.slug)}
    return render(request, "portal/tenant/audit.html", context)
