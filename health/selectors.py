"""Reads of health: what is quarantined now, since when and why, and the fleet as health sees it.

"Is this GPU out of service?" has one answer, `fleet.selectors` (`IN_SERVICE`, `QUARANTINED`), read from the
fleet's flags so that `tenants` (capacity, admission) and the GPU pass below `health` use it too. This module
answers what only the `Quarantine` and `HealthEvent` rows know: since when a GPU is out and which event took
it out (metering stops billing it from then, and credits the pods it held), why (the node's taint, the
capacity table's reasons), and the pages' view of nodes, GPUs and open events. `health.services` writes the
rows and the flags in one transaction, so the two agree.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Count

from fleet.models import Gpu, HostCluster, Node, Pod
from fleet.selectors import QUARANTINED, GpuUse, gpu_uses
from health.models import HealthEvent, Quarantine


@dataclass(frozen=True)
class QuarantinedGpu:
    """A GPU quarantined now, itself or with its node: since when, and the event that took it (or its node)
    out."""

    since: datetime
    event_id: int | None


def quarantined_by_uuid(host_cluster: HostCluster) -> dict[str, QuarantinedGpu]:
    """Every GPU of the host cluster quarantined now (itself or with its node), by UUID; when both are, the
    older quarantine counts."""
    out: dict[str, QuarantinedGpu] = {}
    open_q = Quarantine.objects.filter(node__host_cluster=host_cluster, released_at__isnull=True)
    whole: dict[int, Quarantine] = {}
    for q in open_q.select_related("gpu"):
        if q.gpu is not None:
            out[q.gpu.uuid] = QuarantinedGpu(q.started_at, q.event_id)
        else:
            whole[q.node_id] = q
    if whole:
        for gpu_uuid, node_id in Gpu.objects.filter(node_id__in=whole).values_list("uuid", "node_id"):
            q = whole[node_id]
            if gpu_uuid not in out or q.started_at < out[gpu_uuid].since:
                out[gpu_uuid] = QuarantinedGpu(q.started_at, q.event_id)
    return out


def quarantined_nodes(host_cluster: HostCluster) -> dict[str, str]:
    """Nodes out whole, with the reason their taint carries."""
    rows = Quarantine.objects.filter(node__host_cluster=host_cluster, gpu=None, released_at__isnull=True)
    return dict(rows.values_list("node__name", "reason"))


@dataclass(frozen=True)
class ModelQuarantineShare:
    """One GPU model across the fleet: its GPUs, how many are quarantined (themselves, or their node is), and
    the share that is."""

    model: str
    gpus: int
    quarantined: int

    @property
    def share(self) -> float:
        return self.quarantined / self.gpus if self.gpus else 0.0


def quarantine_share_by_model() -> list[ModelQuarantineShare]:
    """Per GPU model across the fleet: GPUs, and GPUs quarantined (`fleet.selectors.QUARANTINED`)."""
    rows = Gpu.objects.values("gpu_model__slug").annotate(
        total=Count("id"), quarantined=Count("id", filter=QUARANTINED)
    )
    return [
        ModelQuarantineShare(r["gpu_model__slug"], r["total"], r["quarantined"])
        for r in rows.order_by("gpu_model__slug")
    ]


def nodes_view(host_cluster: HostCluster) -> list[dict[str, Any]]:
    """Each node of the host cluster with its GPUs: index, UUID, model, MIG layout in use, what holds it,
    health, why it is out, and the open events (a few queries for the whole cluster)."""
    uses = gpu_uses(host_cluster)
    layouts = dict(
        Pod.objects.filter(host_cluster=host_cluster, gpu_instance_id__isnull=False, finished_at=None)
        .exclude(mig_layout=[])
        .values_list("gpu_uuids__0", "mig_layout")
    )
    events: dict[tuple[int, str], list[HealthEvent]] = defaultdict(list)
    for event in HealthEvent.objects.filter(host_cluster=host_cluster, closed_at=None).order_by("first_seen"):
        events[(event.node_id, event.subject)].append(event)
    out_q = {
        (q.node_id, q.gpu_id): q
        for q in Quarantine.objects.filter(node__host_cluster=host_cluster, released_at=None)
    }
    nodes = (
        Node.objects.filter(host_cluster=host_cluster).prefetch_related("gpus__gpu_model").order_by("name")
    )
    return [_node_view(node, uses, layouts, events, out_q) for node in nodes]


def _event_view(event: HealthEvent) -> dict[str, Any]:
    return {
        "id": event.public_id,
        "signal": event.signal,
        "value": event.value,
        "severity": event.severity,
        "message": event.message,
        "first_seen": event.first_seen,
        "last_seen": event.last_seen,
    }


def _quarantine_view(q: Quarantine | None) -> dict[str, Any] | None:
    if q is None:
        return None
    return {"reason": q.reason, "since": q.started_at, "event": q.event.public_id if q.event else None}


def _node_view(
    node: Node,
    uses: Mapping[str, GpuUse],
    layouts: Mapping[str, list[str]],
    events: Mapping[tuple[int, str], list[HealthEvent]],
    out_q: Mapping[tuple[int, int | None], Quarantine],
) -> dict[str, Any]:
    gpus = []
    for gpu in sorted(node.gpus.all(), key=lambda g: g.index):
        use = uses.get(gpu.uuid, GpuUse("free"))
        gpus.append(
            {
                "index": gpu.index,
                "uuid": gpu.uuid,
                "model": gpu.gpu_model.slug,
                "mig_layout": layouts.get(gpu.uuid, []),
                "state": use.state,
                "tenants": list(use.tenants),
                "health": gpu.health,
                "quarantine": _quarantine_view(out_q.get((node.pk, gpu.pk))),
                "open_events": [_event_view(e) for e in events.get((node.pk, f"gpu:{gpu.index}"), [])],
            }
        )
    return {
        "name": node.name,
        "state": node.state,
        "zone": node.zone,
        "rack": node.rack,
        "quarantine": _quarantine_view(out_q.get((node.pk, None))),
        "open_events": [_event_view(e) for e in events.get((node.pk, "node"), [])],
        "gpus": gpus,
    }


def quarantine_reasons_by_model(
    host_cluster: HostCluster | None = None,
) -> dict[tuple[str, str], dict[str, int]]:
    """GPUs out now per (host cluster, GPU model), counted by the reason they are out (for capacity)."""
    rows = Quarantine.objects.filter(released_at=None)
    if host_cluster is not None:
        rows = rows.filter(node__host_cluster=host_cluster)
    out: dict[tuple[str, str], dict[str, int]] = defaultdict(lambda: defaultdict(int))
    counted: set[int] = set()
    for q in rows.select_related("node__host_cluster").prefetch_related(
        "node__gpus__gpu_model", "gpu__gpu_model"
    ):
        gpus = [q.gpu] if q.gpu is not None else list(q.node.gpus.all())
        for gpu in gpus:
            if gpu is None or gpu.pk in counted:
                continue
            counted.add(gpu.pk)
            out[(q.node.host_cluster.name, gpu.gpu_model.slug)][q.reason] += 1
    return {key: dict(reasons) for key, reasons in out.items()}


def open_quarantines(host_cluster: HostCluster) -> list[Quarantine]:
    """What is out of service in the host cluster now, with its event, oldest first (the fleet page)."""
    rows = Quarantine.objects.filter(node__host_cluster=host_cluster, released_at=None)
    return list(rows.select_related("node", "gpu", "event").order_by("started_at", "id"))
