"""`/tenants/<slug>/workloads/`: what the tenant runs on the fleet, with GPUs, class, age and state."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from portal.scoping import tenant_for
from scheduling.selectors import pods_of, units_of

PER_PAGE = 50
STATES = {"running": True, "finished": False, "all": None}


@login_required
def workloads(request: HttpRequest, slug: str) -> HttpResponse:
    tenant = tenant_for(request, slug)
    state = request.GET.get("state", "running")
    if state not in STATES:
        state = "running"
    page = Paginator(pods_of(tenant.pk, running=STATES[state]), PER_PAGE).get_page(request.GET.get("page"))
    context = {
        "tenant": tenant,
        "tab": "workloads",
        "state": state,
        "states": list(STATES),
        "page": page,
        "rows": [(pod, units_of(pod)) for pod in page.object_list],
        "query": f"state={state}",
        "driver": tenant.cluster.host_cluster.driver,
    }
    return render(request, "portal/tenant/workloads.html", context)
