"""Platform administrators' pages: `/fleet/`, the GPUs of every host cluster drawn as the topology."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from gpucloud.errors import PermissionDenied
from portal.scoping import actor_of
from scheduling.models import GpuModel, HostCluster, Node
from scheduling.selectors import GpuUse, gpu_uses

STATES = ("free", "allocated", "mig", "shared", "quarantined")


def require_platform_admin(request: HttpRequest, page: str) -> None:
    if not actor_of(request).is_platform_admin:
        raise PermissionDenied(f"{page} is for platform administrators")


@dataclass
class Rack:
    path: tuple[str, str, str]  # zone, block, rack
    nodes: list[tuple[Node, list[tuple[Any, GpuUse, bool]]]] = field(default_factory=list)


def _racks(host_cluster: HostCluster, model: str, state: str, counts: Counter[str]) -> list[Rack]:
    uses = gpu_uses(host_cluster)
    racks: dict[tuple[str, str, str], Rack] = {}
    nodes = (
        host_cluster.nodes.prefetch_related("gpus__gpu_model").order_by("zone", "block", "rack", "name").all()
    )
    for node in nodes:
        gpus = []
        for gpu in node.gpus.all():
            use = uses.get(gpu.uuid, GpuUse("free"))
            counts[use.state] += 1
            shown = (not model or gpu.gpu_model.slug == model) and (not state or use.state == state)
            gpus.append((gpu, use, shown))
        key = (node.zone or "—", node.block or "—", node.rack or "—")
        racks.setdefault(key, Rack(key)).nodes.append((node, gpus))
    return list(racks.values())


@login_required
def fleet(request: HttpRequest) -> HttpResponse:
    require_platform_admin(request, "the fleet page")
    model, state = request.GET.get("model", ""), request.GET.get("state", "")
    counts: Counter[str] = Counter()
    clusters = [(hc, _racks(hc, model, state, counts)) for hc in HostCluster.objects.order_by("name")]
    context = {
        "nav": "fleet",
        "clusters": clusters,
        "models": GpuModel.objects.filter(gpus__isnull=False).distinct().order_by("slug"),
        "states": STATES,
        "model": model,
        "state": state,
        "counts": [(s, counts[s]) for s in STATES],
    }
    return render(request, "portal/admin/fleet.html", context)
