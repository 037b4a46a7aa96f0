"""`/tenants/<slug>/workloads/`: what the tenant runs and what waits, with GPUs, class, age and state.

On a simulated host cluster, its pods; on a Kubernetes host cluster, the Kueue `Workload` objects the
reconciler last saw in the tenant's namespace (`clusters.models.ObservedWorkload`).
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import F, QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from clusters.models import ObservedWorkload
from fleet.models import HostCluster
from fleet.selectors import pods_of, units_of
from portal.scoping import tenant_for
from tenants.models import Tenant

PER_PAGE = 50
STATES = {"running": True, "finished": False, "all": None}


@login_required
def workloads(request: HttpRequest, slug: str) -> HttpResponse:
    tenant = tenant_for(request, slug)
    state = request.GET.get("state", "running")
    if state not in STATES:
        state = "running"
    host_cluster = tenant.cluster.host_cluster
    number = request.GET.get("page")
    if host_cluster.driver == HostCluster.Driver.SIMULATED:
        page = Paginator(pods_of(tenant.pk, running=STATES[state]), PER_PAGE).get_page(number)
        rows: list[Any] = [(pod, units_of(pod)) for pod in page.object_list]
    else:
        page = Paginator(_observed(tenant, state), PER_PAGE).get_page(number)
        rows = list(page.object_list)
    context = {
        "tenant": tenant,
        "tab": "workloads",
        "state": state,
        "states": list(STATES),
        "page": page,
        "rows": rows,
        "query": f"state={state}",
        "driver": host_cluster.driver,
        "kai": host_cluster.scheduler == "kai",
    }
    return render(request, "portal/tenant/workloads.html", context)


def _observed(tenant: Tenant, state: str) -> QuerySet[ObservedWorkload]:
    """ "running" is what is admitted or waits in the queue; the oldest first, so what waits longest shows."""
    rows = ObservedWorkload.objects.filter(tenant=tenant)
    if state == "running":
        rows = rows.exclude(state=ObservedWorkload.State.FINISHED)
    elif state == "finished":
        rows = rows.filter(state=ObservedWorkload.State.FINISHED)
    return rows.order_by(F("created_at").asc(nulls_last=True), "name")
