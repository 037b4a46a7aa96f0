"""Reads of billing: hourly sums of the ledger by tenant, GPU class and time bucket, scoped to the caller; a
tenant's invoices and budget; the rate cards; and the health events tenants were credited for."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.db.models import F, Q, QuerySet, Sum
from django.db.models.functions import TruncDay

from billing.models import Budget, HealthCredit, Invoice, RateCard, UsageHour
from tenants.models import Tenant

GROUPS = ("gpu_class", "day", "hour")


def credited_events(tenants: QuerySet[Tenant]) -> QuerySet[Any]:
    """The ids of the health events that cost these tenants time: those they were credited for. What someone
    other than a platform administrator sees of `/api/v1/health-events/` (`health.api.views`)."""
    return HealthCredit.objects.filter(tenant__in=tenants).values("event_id")


def usage(
    *,
    tenants: QuerySet[Tenant],
    include_platform: bool,
    start: datetime | None = None,
    end: datetime | None = None,
    group_by: str = "gpu_class",
) -> QuerySet[UsageHour, dict[str, Any]]:
    """Sums of micro GPU-seconds, utilised micro GPU-seconds and millijoules.

    Rows per tenant × GPU class, and per day or hour when asked; `tenant__slug` is None for the platform's
    idle and system time, which only `include_platform` shows.
    """
    scope = Q(tenant__in=tenants)
    if include_platform:
        scope |= Q(tenant__isnull=True)
    rows = UsageHour.objects.filter(scope)
    if start is not None:
        rows = rows.filter(hour__gte=start)
    if end is not None:
        rows = rows.filter(hour__lt=end)
    keys = ["tenant__slug", "gpu_class"]
    if group_by == "day":
        rows = rows.annotate(period=TruncDay("hour"))
        keys.append("period")
    elif group_by == "hour":
        rows = rows.annotate(period=F("hour"))
        keys.append("period")
    sums: QuerySet[UsageHour, dict[str, Any]] = (
        rows.values(*keys)
        .annotate(gpu_us=Sum("gpu_us"), util_gpu_us=Sum("util_gpu_us"), millijoules=Sum("millijoules"))
        .order_by(*[k if k != "tenant__slug" else F(k).asc(nulls_first=True) for k in keys])
    )
    return sums


def invoices_of(tenant: Tenant) -> QuerySet[Invoice]:
    """The tenant's invoices, the newest month first."""
    return Invoice.objects.filter(tenant=tenant).order_by("-period_start")


def budget_of(tenant: Tenant) -> Budget | None:
    """The tenant's budget with the alerts it raised, or None."""
    return Budget.objects.filter(tenant=tenant).prefetch_related("alerts").first()


def budgets_of(tenants: Iterable[Tenant]) -> dict[int, Budget]:
    """The budgets of these tenants, by tenant id (a tenant without one is absent)."""
    return {b.tenant_id: b for b in Budget.objects.filter(tenant__in=list(tenants))}


def rate_cards() -> QuerySet[RateCard]:
    """Every rate card version, the newest in force first."""
    return RateCard.objects.order_by("-effective_from", "-version")
