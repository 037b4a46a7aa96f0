"""`/capacity/`: per host cluster and GPU class, capacity against guaranteed against in use, and what-if."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from gpucloud.errors import ServiceError
from placement import what_if
from placement.service import capacity_rows
from portal.forms import WhatIfForm, whole
from portal.scoping import form_errors
from portal.views.fleet import require_platform_admin
from tenants.selectors import visible_tenants

KINDS = {"whole": "Whole GPUs", "mig": "MIG slices", "shared": "Shared GPUs", "": "Every class"}


@dataclass(frozen=True)
class CapacityBar:
    """Guaranteed and in use as percentages of capacity (the bar's whole length)."""

    guaranteed_pct: float
    allocated_pct: float


def capacity_bar(row: dict[str, Any]) -> CapacityBar:
    length = max(int(row["capacity"]), int(row["guaranteed"]), int(row["allocated"]), 1)
    return CapacityBar(
        guaranteed_pct=round(100 * int(row["guaranteed"]) / length, 2),
        allocated_pct=round(100 * int(row["allocated"]) / length, 2),
    )


def ask(request: HttpRequest, form: WhatIfForm) -> dict[str, Any] | None:
    """The answer of `placement.what_if` to the form's question, or None with the refusal on the form."""
    data = form.cleaned_data
    who = {"tenant": data["tenant"].strip(), "trust_tier": data["trust_tier"]}
    tenants = visible_tenants(request.user)
    try:
        if data["ask"] == "quota":
            quota = what_if.QuotaAsk(gpu_class=data["gpu_class"], guaranteed=whole(data["guaranteed"]), **who)
            return what_if.quotas(tenants, [quota], data["host_cluster"])
        gang = what_if.GangAsk(
            pods=whole(data["pods"], 1),
            gpus_per_pod=whole(data["gpus_per_pod"], 1),
            gpu_class=data["gpu_class"],
            level=data["level"] or "rack",
            required=data["required"],
            **who,
        )
        return what_if.gang(tenants, gang, data["host_cluster"])
    except ServiceError as error:
        form_errors(form, error)
        return None


@login_required
def capacity(request: HttpRequest) -> HttpResponse:
    require_platform_admin(request, "the capacity page")
    kind = request.GET.get("kind", "whole")
    rows = [r for r in capacity_rows() if not kind or r["kind"] == kind]
    form = WhatIfForm(request.POST or None)
    answer = ask(request, form) if request.method == "POST" and form.is_valid() else None
    context = {
        "nav": "capacity",
        "rows": [(r, capacity_bar(r)) for r in rows],
        "kinds": KINDS,
        "kind": kind,
        "form": form,
        "answer": answer,
    }
    return render(request, "portal/admin/capacity.html", context)
