"""`/tenants/<slug>/usage/`: GPU-hours by class over time, used against allocated, and the downloads."""

from __future__ import annotations

import csv
import io
from collections import defaultdict
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from billing import exports, selectors
from billing.services import invoicing
from gpucloud import spreadsheet
from portal.scoping import actor_of, allowed, tenant_for
from tenants.models import Tenant
from tenants.selectors import visible_tenants

US_PER_HOUR = 3_600_000_000  # micro GPU-seconds in a GPU-hour
MJ_PER_KWH = 3_600_000_000  # millijoules in a kilowatt-hour
GROUPS = {"day": "Day", "hour": "Hour"}
STEPS = {"day": timedelta(days=1), "hour": timedelta(hours=1)}
DEFAULT_DAYS = 7
MAX_DAYS = {"day": 366, "hour": 31}  # every period of the range is drawn: a year of days, a month of hours


def _date(raw: str | None, default: date, name: str, errors: dict[str, str]) -> date:
    if not raw:
        return default
    try:
        return date.fromisoformat(raw)
    except ValueError:
        errors[name] = f"{raw!r} is not a date written YYYY-MM-DD"
        return default


def _range(request: HttpRequest) -> tuple[date, date, str, dict[str, str]]:
    """The days asked for (inclusive), the granularity, and what was wrong with the asking."""
    errors: dict[str, str] = {}
    today = timezone.now().date()
    end = _date(request.GET.get("end"), today, "end", errors)
    start = _date(request.GET.get("start"), end - timedelta(days=DEFAULT_DAYS - 1), "start", errors)
    group = request.GET.get("group_by", "day")
    if group not in GROUPS:
        errors["group_by"] = f"{group!r} is not one of: {', '.join(GROUPS)}"
        group = "day"
    if start > end:
        errors["start"] = "the start is after the end"
        start = end
    if (end - start).days >= MAX_DAYS[group]:
        errors["start"] = f"by {group}, at most {MAX_DAYS[group]} days are shown; showing the last ones"
        start = end - timedelta(days=MAX_DAYS[group] - 1)
    return start, end, group, errors


def _rows(tenant: Tenant, request: HttpRequest, start: date, end: date, group: str) -> list[dict[str, Any]]:
    rows = selectors.usage(
        tenants=visible_tenants(request.user, "billing.view").filter(pk=tenant.pk),
        include_platform=False,
        start=datetime.combine(start, time(), UTC),
        end=datetime.combine(end + timedelta(days=1), time(), UTC),
        group_by=group,
    )
    return list(rows)


def chart(rows: list[dict[str, Any]], start: date, end: date, group: str) -> dict[str, Any]:
    """uPlot's shape: GPU-hours allocated and used per class over every period of the days asked (a period
    nothing was metered in is 0), and the x range to draw, both in epoch seconds, uPlot's unit of time.

    The range is given, not left to uPlot: from one point (a first day of usage) it would widen the axis
    by itself to years around it.
    """
    step = STEPS[group]
    first = datetime.combine(start, time(), UTC)
    count = (end - start + timedelta(days=1)) // step
    x = [int((first + i * step).timestamp()) for i in range(count)]
    index = {second: i for i, second in enumerate(x)}
    allocated: dict[str, list[float]] = defaultdict(lambda: [0.0] * count)
    used: dict[str, list[float]] = defaultdict(lambda: [0.0] * count)
    for r in rows:
        i = index[int(r["period"].timestamp())]
        allocated[r["gpu_class"]][i] += r["gpu_us"] / US_PER_HOUR
        used[r["gpu_class"]][i] += r["util_gpu_us"] / US_PER_HOUR
    series = []
    for name in sorted(allocated):
        series.append({"label": f"{name} allocated", "values": _round(allocated[name]), "fill": True})
        series.append({"label": f"{name} used", "values": _round(used[name]), "dash": True})
    x_range = [x[0], max(x[-1], x[0] + int(step.total_seconds()))]
    return {"x": x, "range": x_range, "series": series, "unit": "GPU-h"}


def _round(values: list[float]) -> list[float]:
    return [round(v, 4) for v in values]


def totals(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    by_class: dict[str, dict[str, float]] = defaultdict(lambda: {"gpu_us": 0, "util_gpu_us": 0, "mj": 0})
    for r in rows:
        sums = by_class[r["gpu_class"]]
        sums["gpu_us"] += r["gpu_us"]
        sums["util_gpu_us"] += r["util_gpu_us"]
        sums["mj"] += r["millijoules"]
    return [
        {
            "gpu_class": name,
            "allocated": s["gpu_us"] / US_PER_HOUR,
            "used": s["util_gpu_us"] / US_PER_HOUR,
            "utilisation": 100 * s["util_gpu_us"] / s["gpu_us"] if s["gpu_us"] else 0,
            "kwh": s["mj"] / MJ_PER_KWH,
        }
        for name, s in sorted(by_class.items())
    ]


@login_required
def usage(request: HttpRequest, slug: str) -> HttpResponse:
    tenant = tenant_for(request, slug, "billing.view")
    start, end, group, errors = _range(request)
    rows = _rows(tenant, request, start, end, group)
    if request.GET.get("as") == "csv":
        return _csv(tenant, rows, start, end)
    context = {
        "tenant": tenant,
        "tab": "usage",
        "start": start,
        "end": end,
        "group": group,
        "groups": GROUPS,
        "errors": errors,
        "chart": chart(rows, start, end, group) if rows else None,
        "totals": totals(rows),
        "months": _months(tenant),
        "can": allowed(request, tenant, "invoice.download"),
    }
    return render(request, "portal/tenant/usage.html", context)


def _months(tenant: Tenant) -> list[str]:
    starts = selectors.invoices_of(tenant).values_list("period_start", flat=True)
    return [s.strftime("%Y-%m") for s in starts[:12]]


def _csv(tenant: Tenant, rows: list[dict[str, Any]], start: date, end: date) -> HttpResponse:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["period_start", "gpu_class", "gpu_hours", "utilised_gpu_hours", "kwh"])
    for r in rows:
        writer.writerow(
            spreadsheet.row(
                [
                    r["period"].isoformat(),
                    r["gpu_class"],
                    f"{r['gpu_us'] / US_PER_HOUR:.6f}",
                    f"{r['util_gpu_us'] / US_PER_HOUR:.6f}",
                    f"{r['millijoules'] / MJ_PER_KWH:.6f}",
                ]
            )
        )
    response = HttpResponse(buffer.getvalue(), content_type="text/csv")
    response["Content-Disposition"] = f'attachment; filename="{tenant.slug}-usage-{start}-{end}.csv"'
    return response


@login_required
def focus(request: HttpRequest, slug: str, month: str) -> HttpResponse:
    """The month's invoices as FOCUS rows, as the API's export gives them (and audited the same way)."""
    tenant = tenant_for(request, slug, "invoice.download")
    invoices = [
        i
        for i in selectors.invoices_of(tenant).prefetch_related("lines")
        if i.period_start.strftime("%Y-%m") == month
    ]
    invoicing.record_export(actor=actor_of(request), tenant=tenant, what="focus", object_id=month)
    response = HttpResponse(exports.invoices_focus(invoices), content_type="text/csv")
    response["Content-Disposition"] = f'attachment; filename="{tenant.slug}-{month}-focus.csv"'
    return response
