"""`/`: the tenants a person belongs to, each with its cluster, GPUs against quota, spend and changes."""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from billing.models import Budget
from billing.selectors import budgets_of
from billing.services.budgets import spent_this_month
from core.models import AuditEvent
from fleet.selectors import units_in_use
from portal.bars import Bar, bar
from portal.scoping import actor_of
from tenants.models import Tenant
from tenants.selectors import audit_events, quotas_of, visible_tenants
from tenants.services import roles

PER_PAGE = 12


@dataclass
class TenantSummary:
    tenant: Tenant
    bars: list[tuple[str, Bar]] = field(default_factory=list)
    spent: Decimal | None = None  # None: the person may not see money
    budget: Budget | None = None
    changes: list[AuditEvent] | None = None  # None: the person may not read the audit log

    @property
    def budget_pct(self) -> float:
        if self.budget is None or self.spent is None or not self.budget.monthly_amount:
            return 0.0
        return float(100 * self.spent / self.budget.monthly_amount)


def summarise(request: HttpRequest, tenants: list[Tenant]) -> list[TenantSummary]:
    actor, now = actor_of(request), timezone.now()
    used = units_in_use(t.pk for t in tenants)
    budgets = budgets_of(tenants)
    summaries = []
    for tenant in tenants:
        summary = TenantSummary(tenant)
        for quota in quotas_of(tenant):
            name = quota.gpu_class.name
            summary.bars.append((name, bar(used.get((tenant.pk, name), 0), quota.guaranteed, quota.burst)))
        if roles.can(actor, tenant, "billing.view"):
            summary.spent, summary.budget = spent_this_month(tenant, now), budgets.get(tenant.pk)
        if roles.can(actor, tenant, "audit.view"):
            summary.changes = list(audit_events(tenant)[:4])
        summaries.append(summary)
    return summaries


@login_required
def dashboard(request: HttpRequest) -> HttpResponse:
    tenants = (
        visible_tenants(request.user)
        .exclude(state=Tenant.State.DELETED)
        .select_related("cluster__host_cluster")
        .order_by("slug")
    )
    page = Paginator(tenants, PER_PAGE).get_page(request.GET.get("page"))
    context: dict[str, Any] = {
        "nav": "dashboard",
        "page": page,
        "summaries": summarise(request, list(page.object_list)),
        "month": timezone.now().strftime("%B %Y"),
    }
    return render(request, "portal/dashboard.html", context)
