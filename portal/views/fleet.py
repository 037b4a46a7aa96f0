"""Platform administrators' pages: `/fleet/`, the GPUs of every host cluster drawn as the topology."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from fleet.models import HostCluster, Node
from fleet.selectors import (
    SERVING,
    GpuUse,
    gpu_uses,
    models_in_fleet,
    nodes_by_topology,
    serving_host_clusters,
)
from gpucloud.errors import PermissionDenied
from health import selectors as health
from health.models import Quarantine
from portal.scoping import actor_of

STATES = ("free", "allocated", "mig", "shared", "quarantined")


def require_platform_admin(request: HttpRequest, page: str) -> None:
    if not actor_of(request).is_platform_admin:
        raise PermissionDenied(f"{page} is for platform administrators")


@dataclass
class Rack:
    path: tuple[str, str, str]  # zone, block, rack
    nodes: list[tuple[Node, list[tuple[Any, GpuUse, bool]]]] = field(default_factory=list)


def _racks(
    host_cluster: HostCluster, model: str, state: str, counts: Counter[str], out: list[Quarantine]
) -> list[Rack]:
    uses = gpu_uses(host_cluster)
    why = _why_out(out)
    racks: dict[tuple[str, str, str], Rack] = {}
    for node in nodes_by_topology(host_cluster):
        gpus = []
        for gpu in node.gpus.all():
            use = uses.get(gpu.uuid, GpuUse("free"))
            if use.state == "quarantined":
                use = GpuUse("quarantined", detail=why.get(gpu.pk) or why.get(-node.pk, ""))
            counts[use.state] += 1
            shown = (not model or gpu.gpu_model.slug == model) and (not state or use.state == state)
            gpus.append((gpu, use, shown))
        key = (node.zone or "—", node.block or "—", node.rack or "—")
        racks.setdefault(key, Rack(key)).nodes.append((node, gpus))
    return list(racks.values())


def _why_out(out: list[Quarantine]) -> dict[int, str]:
    """Why each GPU (by id) or node (by minus its id) is out, as the GPU's tooltip says it."""
    return {
        (q.gpu_id if q.gpu_id else -q.node_id): f"{q.reason} since {q.started_at:%Y-%m-%d %H:%M} UTC"
        for q in out
    }


@login_required
def fleet(request: HttpRequest) -> HttpResponse:
    require_platform_admin(request, "the fleet page")
    model, state = request.GET.get("model", ""), request.GET.get("state", "")
    counts: Counter[str] = Counter()
    clusters = []
    for hc in serving_host_clusters():  # a retired one is history, not fleet: named below the map only
        out = health.open_quarantines(hc)
        clusters.append((hc, _racks(hc, model, state, counts, out), out))
    context = {
        "nav": "fleet",
        "clusters": clusters,
        "models": models_in_fleet(),
        "states": STATES,
        "model": model,
        "state": state,
        "counts": [(s, counts[s]) for s in STATES],
        "retired": HostCluster.objects.exclude(SERVING).order_by("name").values_list("name", flat=True),
    }
    return render(request, "portal/admin/fleet.html", context)
