"""Reads of the fleet and what runs on it, for pages and reports, and the one answer to "is this GPU in
service?".

What is out of service is read here, from the fleet's flags (`Gpu.health`, `Node.state`), and nowhere else:
`fleet` sits below `tenants`, so quota admission and capacity (`tenants.capacity`), the GPU pass
(`clusters.partitions.gpu_pass`) and the health app's own counts all use the same rule. The health app is the
one writer of the flags (`health.services.quarantines`), in the transaction that opens or releases a
`Quarantine`, so the flags and the open quarantines agree; what only the rows know (why, since when, which
event) is read in `health.selectors`, which builds on the predicates below.

- `IN_SERVICE`: a GPU that takes work: healthy, on a node that is ready (not cordoned, not quarantined), of a
  host cluster in service (not retired).
- `QUARANTINED`: a GPU out for its health: quarantined itself or with its node (a cordoned node's GPUs are
  out of service but not quarantined).
- `PRESENT`: a node still in its cluster; a `gone` node (the node sync no longer lists it) is kept as
  history, out of service, and left out of counts, the fleet map and the placement model.
- `SERVING`: a host cluster in service, i.e. not retired (on HostCluster). A retired one is kept for its
  history (nodes, GPUs, pods, the usage ledger) and is out of everything live: the periodic passes, capacity,
  placement and the fleet map; `serving_host_clusters` is where those start.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.db.models import Count, Q, QuerySet

from fleet.models import Gpu, GpuClass, GpuModel, HostCluster, Node, Pod

SERVING = ~Q(state=HostCluster.State.RETIRED)  # on HostCluster
IN_SERVICE = Q(health=Gpu.Health.HEALTHY, node__state=Node.State.READY) & ~Q(
    node__host_cluster__state=HostCluster.State.RETIRED
)  # on Gpu
QUARANTINED = Q(health=Gpu.Health.QUARANTINED) | Q(node__state=Node.State.QUARANTINED)  # on Gpu
PRESENT = ~Q(state=Node.State.GONE)  # on Node


def gpus_out_of_service(host_cluster: HostCluster) -> dict[str, frozenset[int]]:
    """Indexes of the GPUs out of service (not `IN_SERVICE`) per node name; one query."""
    out: dict[str, set[int]] = defaultdict(set)
    rows = Gpu.objects.filter(node__host_cluster=host_cluster).exclude(IN_SERVICE)
    for name, index in rows.values_list("node__name", "index"):
        out[name].add(index)
    return {name: frozenset(indexes) for name, indexes in out.items()}


def quarantined_gpu_indexes(host_cluster: HostCluster) -> dict[str, list[int]]:
    """Indexes of the GPUs quarantined themselves, by node, in order (a node out whole is not listed here)."""
    rows = Gpu.objects.filter(node__host_cluster=host_cluster, health=Gpu.Health.QUARANTINED)
    out: dict[str, list[int]] = defaultdict(list)
    for name, index in rows.order_by("node__name", "index").values_list("node__name", "index"):
        out[name].append(index)
    return dict(out)


def is_quarantined(health: str, node_state: str) -> bool:
    """`QUARANTINED` for a GPU already read: its health flag and its node's state."""
    return health == Gpu.Health.QUARANTINED or node_state == Node.State.QUARANTINED


def units_in_use(tenant_ids: Iterable[int]) -> dict[tuple[int, str], int]:
    """Units of each GPU class the tenants' running pods hold now: (tenant id, class name) → units.

    A whole-GPU pod holds one unit per GPU; a MIG instance or a share is one unit of its class.
    """
    pods = Pod.objects.filter(tenant_id__in=list(tenant_ids), finished_at__isnull=True).values_list(
        "tenant_id", "gpu_class__name", "gpu_class__kind", "gpu_uuids"
    )
    used: dict[tuple[int, str], int] = defaultdict(int)
    for tenant_id, name, kind, uuids in pods:
        used[(tenant_id, name)] += len(uuids) if kind == GpuClass.Kind.WHOLE else 1
    return used


@dataclass(frozen=True)
class GpuUse:
    """What holds one physical GPU now: `free`, `allocated` (whole, to one tenant), `mig` (instances of its
    layout) or `shared` (fractions), `quarantined`, or `gone` (with its node); with the tenants holding it."""

    state: str
    tenants: tuple[str, ...] = ()
    detail: str = ""


def gpu_uses(host_cluster: HostCluster) -> dict[str, GpuUse]:
    """Every GPU of the host cluster by UUID, from its health and the running pods (one query each)."""
    held: dict[str, list[tuple[str, int | None, int, list[Any]]]] = defaultdict(list)
    pods = Pod.objects.filter(host_cluster=host_cluster, finished_at__isnull=True).values_list(
        "gpu_uuids", "tenant__slug", "gpu_instance_id", "gpu_milli", "mig_layout"
    )
    for uuids, slug, instance, milli, layout in pods:
        for uuid in uuids:
            held[uuid].append((slug or "platform", instance, milli, layout))
    uses = {}
    gpus = Gpu.objects.filter(node__host_cluster=host_cluster).values_list("uuid", "health", "node__state")
    for uuid, health, node_state in gpus:
        uses[uuid] = _use(health, node_state, held.get(uuid, []))
    return uses


def _use(health: str, node_state: str, pods: list[tuple[str, int | None, int, list[Any]]]) -> GpuUse:
    if node_state == Node.State.GONE:
        return GpuUse("gone")
    if is_quarantined(health, node_state):
        return GpuUse("quarantined")
    if not pods:
        return GpuUse("free")
    tenants = tuple(sorted({slug for slug, *_ in pods}))
    if any(instance is not None for _, instance, _, _ in pods):
        layout = next(layout for _, instance, _, layout in pods if instance is not None)
        names = ", ".join(str(profile) for profile in layout)
        return GpuUse("mig", tenants, f"{len(pods)} MIG instances in use; layout: {names}")
    if any(milli < 1000 for _, _, milli, _ in pods):
        share = sum(milli for _, _, milli, _ in pods) / 10
        return GpuUse("shared", tenants, f"{len(pods)} pods share it ({share:g} % given out)")
    return GpuUse("allocated", tenants)


def pods_of(tenant_id: int, *, running: bool | None = None) -> Any:
    """The tenant's pods on the simulated fleet, newest first; `running` True/False filters by state."""
    pods = Pod.objects.filter(tenant_id=tenant_id).select_related("gpu_class", "node")
    if running is not None:
        pods = pods.filter(finished_at__isnull=running)
    return pods.order_by("-started_at", "name")


def units_of(pod: Pod) -> int:
    """Units of its class the pod holds: GPUs for a whole class, one for a MIG instance or a share."""
    return len(pod.gpu_uuids) if pod.gpu_class.kind == GpuClass.Kind.WHOLE else 1


def host_clusters() -> QuerySet[HostCluster]:
    """Every host cluster, by name."""
    return HostCluster.objects.order_by("name")


def serving_host_clusters() -> QuerySet[HostCluster]:
    """Host clusters in service (not retired), by name: what the periodic passes and capacity go over."""
    return HostCluster.objects.filter(SERVING).order_by("name")


def host_clusters_counted() -> QuerySet[HostCluster]:
    """Every host cluster, by name, with `node_count`, `gpu_count` (nodes gone left out) and `tenant_count`
    (tenants not deleted)."""
    return host_clusters().annotate(**counts())


def counts() -> dict[str, Count]:
    """`node_count` and `gpu_count` of a host cluster's nodes still present, and `tenant_count` of its
    tenants not deleted: annotations for a HostCluster queryset."""
    present = ~Q(nodes__state=Node.State.GONE)
    return {
        "node_count": Count("nodes", filter=present, distinct=True),
        "gpu_count": Count("nodes__gpus", filter=present, distinct=True),
        "tenant_count": Count(
            "tenant_clusters", filter=~Q(tenant_clusters__tenant__state="deleted"), distinct=True
        ),
    }


def nodes_by_topology(host_cluster: HostCluster) -> QuerySet[Node]:
    """The host cluster's nodes (gone ones left out) in zone, block, rack order, with GPUs and models."""
    nodes = host_cluster.nodes.filter(PRESENT).prefetch_related("gpus__gpu_model")
    return nodes.order_by("zone", "block", "rack", "name")


def models_in_fleet() -> QuerySet[GpuModel]:
    """The GPU models some GPU of the fleet is, by slug."""
    return GpuModel.objects.filter(gpus__isnull=False).distinct().order_by("slug")
