"""The placement engine in the product: its fleet model built from the database, and placements and what-ifs
answered through it (docs/placement.md, "In the product").

The engine (`placement/engine/`) is pure and knows nothing of rows; this module is the glue. A
:class:`FleetModel` is one host cluster at one moment: its nodes and GPUs with topology and health, the pods
the host cluster is running (`scheduling.Pod` rows not finished: the simulator's, or the live view's of a
Kubernetes host cluster), nodes dedicated to isolated tenants (as the dedication pass persisted them,
`placement.dedication`), and MIG layouts. Tenancy rules are the engine's (a GPU is shared by two tenants only
if both are trusted, MIG instances of one GPU may serve different tenants, isolated tenants get whole GPUs on
nodes dedicated to them, quarantined hardware takes nothing new); this module only feeds it the facts.

Nothing here writes to the database: the simulator records what it places, the API only asks.
"""

from __future__ import annotations

import copy
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass, field
from datetime import datetime

from django.conf import settings
from django.db.models import Q, Sum
from django.utils import timezone

from fleet import catalog
from fleet.models import Gpu, GpuClass, GpuModel, HostCluster, Node, Pod
from fleet.selectors import serving_host_clusters
from health import selectors as health
from placement.engine import (
    Engine,
    EngineError,
    GangRequest,
    MigGpu,
    NodeSpec,
    Placement,
    PodRequest,
    Tier,
    Topology,
    plan_mig,
)
from placement.engine.fleet import FREE
from placement.engine.mig import profile
from tenants.capacity import capacity_table
from tenants.models import DedicatedNode, Quota, Tenant

MILLI = 1000
LIVE_STATES = (
    Tenant.State.PENDING,
    Tenant.State.PROVISIONING,
    Tenant.State.READY,
    Tenant.State.SUSPENDED,
)
# What a simulated pod asks besides GPUs. Not stored on Pod: it is a function of the pod's class and
# size, so the fleet model can be rebuilt from the rows alone.
CPU_PER_GPU, MEMORY_PER_GPU = 4000, 32 * 1024
CPU_PER_SLICE, MEMORY_PER_SLICE = 1000, 8 * 1024


def share_milli() -> int:
    """GPU milli of one unit of a `<model>.shared` class."""
    return MILLI // int(settings.SHARED_GPU_REPLICAS)


def pod_request(
    name: str, gpu_class: GpuClass, units: int, tenant: str = "", tier: str = Tier.TRUSTED
) -> PodRequest:
    """The engine's request for a pod holding `units` of a class (whole: GPUs; MIG and shared: one unit)."""
    model = frozenset({gpu_class.gpu_model.slug})
    if gpu_class.kind == GpuClass.Kind.WHOLE:
        return PodRequest(
            name, CPU_PER_GPU * units, MEMORY_PER_GPU * units, units, MILLI, model, tenant, Tier(tier)
        )
    if units != 1:
        raise EngineError(f"a {gpu_class.kind} pod holds exactly one unit, not {units}", f"pod {name}")
    if gpu_class.kind == GpuClass.Kind.MIG:
        return PodRequest(
            name,
            CPU_PER_SLICE,
            MEMORY_PER_SLICE,
            gpu_models=model,
            tenant=tenant,
            tier=Tier(tier),
            mig_profile=gpu_class.mig_profile,
        )
    milli = unit_milli(gpu_class)
    return PodRequest(name, CPU_PER_SLICE, MEMORY_PER_SLICE, 1, milli, model, tenant, Tier(tier))


def unit_milli(gpu_class: GpuClass) -> int:
    """GPU milli one unit of a shared class takes: a time-slice share, or a HAMi fraction's declared share."""
    if gpu_class.kind == GpuClass.Kind.FRACTION:
        return MILLI * catalog.hami_percent(gpu_class.name) // 100
    return share_milli()


def engine_name(namespace: str, name: str) -> str:
    """A pod's name in the engine, unique across tenants (pod names are unique per namespace only)."""
    return f"{namespace}/{name}"


def pod_units(pod: Pod) -> int:
    """Units of its class a recorded pod holds: GPUs for a whole class, one for a MIG slice or a share."""
    return len(pod.gpu_uuids) if pod.gpu_class.kind == GpuClass.Kind.WHOLE else 1


@dataclass(frozen=True)
class Holding:
    """What a placed pod holds, in database terms: the fields of a `Pod`."""

    node: Node
    gpu_uuids: list[str]
    gpu_instance_id: int | None
    gpu_milli: int
    mig_layout: list[str]


@dataclass
class FleetModel:
    """One host cluster as the engine sees it (see the module docstring). Changing it writes nothing."""

    host_cluster: HostCluster
    engine: Engine
    nodes: dict[str, Node]
    gpus: dict[tuple[str, int], Gpu]
    isolated: list[str] = field(default_factory=list)  # slugs of the live isolated tenants, sorted

    pods: list[Pod] = field(default_factory=list)  # running when it was built

    @classmethod
    def build(cls, host_cluster: HostCluster, at: datetime | None = None) -> FleetModel:
        """The fleet model of a host cluster at `at` (default now): running pods held, pools, MIG layouts."""
        return cls.build_many([host_cluster], at)[0]

    @classmethod
    def build_many(cls, host_clusters: Sequence[HostCluster], at: datetime | None = None) -> list[FleetModel]:
        """The fleet models of several host clusters at `at`, from the same seven queries whatever their
        number (nodes, GPUs, running pods, isolated tenants, their guarantees, MIG guarantees)."""
        at = at or timezone.now()
        facts = _Facts.read(host_clusters, at)
        return [cls._from(c, facts.of(c)) for c in host_clusters]

    @classmethod
    def _from(cls, host_cluster: HostCluster, facts: _ClusterFacts) -> FleetModel:
        nodes, gpus, pods = facts.nodes, facts.gpus, facts.pods
        if not nodes:
            raise EngineError("the host cluster has no nodes", f"host cluster {host_cluster.name}")
        # The running pods are the typical-pod sample fragmentation is measured against (MIG pods hold
        # instances, not milli); an idle cluster falls back to the engine's sample of common shapes.
        sample = [_request(pod) for pod in pods if pod.gpu_instance_id is None]
        engine = Engine([_node_spec(n, gpus) for n in nodes.values()], workload=sample)
        model = cls(host_cluster, engine, nodes, gpus, sorted(facts.isolated), pods)
        model._hold(pods)
        model._apply_health()
        model._dedicate_pools(pods, facts.dedicated)
        model._plan_mig(facts.mig_guarantees)
        return model

    # --- building ----------------------------------------------------------------------------------------

    def _hold(self, pods: Iterable[Pod]) -> None:
        """Book the running pods where the rows say they are (they were placed under the rules then)."""
        fleet = self.engine.fleet
        by_uuid = {g.uuid: g for g in self.gpus.values()}
        for pod in pods:
            request = _request(pod)
            tid = fleet.tenant(request.tenant, request.tier) if request.tenant else None
            i = fleet.node(pod.node.name)
            slots = [by_uuid[u].index for u in pod.gpu_uuids]
            if pod.gpu_instance_id is not None:
                if (i, slots[0]) not in fleet.mig:
                    fleet.configure_mig(pod.node.name, slots[0], pod.mig_layout)
                fleet.allocate_mig(request, i, slots[0], pod.gpu_instance_id)
            else:
                fleet.allocate(request, i, slots, tid)

    def _apply_health(self) -> None:
        """Nodes not ready (cordoned or quarantined) and quarantined GPUs take nothing new."""
        fleet = self.engine.fleet
        for node in self.nodes.values():
            if node.state != Node.State.READY:
                fleet.quarantine_node(node.name)
        for (node_name, index), gpu in self.gpus.items():
            if gpu.health != Gpu.Health.HEALTHY:
                fleet.quarantine_gpu(node_name, index)

    def _dedicate_pools(self, pods: Iterable[Pod], dedicated: dict[str, list[str]]) -> None:
        """Isolated tenants' nodes: those the dedication pass persisted (`placement.dedication`, which
        carves them to cover the guarantees), and those running their pods. A node still dedicated to a tenant
        that is no longer isolated takes nothing new until the pass returns it (its taint keeps others
        off)."""
        fleet = self.engine.fleet
        running: dict[str, set[str]] = defaultdict(set)
        for pod in pods:
            if pod.tenant is not None:
                running[pod.tenant.slug].add(pod.node.name)
        for slug, names in sorted(dedicated.items()):
            for name in names:
                if slug not in self.isolated:
                    fleet.quarantine_node(name)
                    continue
                with suppress(EngineError):
                    fleet.dedicate([name], slug)
        # A tenant that became isolated while sharing nodes keeps them shared until its pods end there.
        for slug in self.isolated:
            for name in sorted(running.get(slug, ())):
                with suppress(EngineError):
                    fleet.dedicate([name], slug)

    def _plan_mig(self, demand: dict[str, int]) -> None:
        """MIG layouts: GPUs with running instances keep theirs; idle GPUs are planned for the guarantees."""
        if not demand:
            return
        fleet = self.engine.fleet
        models = {c.split(".mig-")[0] for c in demand}
        candidates = []
        # Later nodes first, so MIG GPUs gather at the end of the fleet and whole GPUs stay together.
        for i in reversed(range(len(fleet))):
            spec = fleet.specs[i]
            if spec.model not in models or not fleet.node_healthy[i] or fleet.node_owner[i] != FREE:
                continue
            for g in range(spec.gpus):
                if (i, g) in fleet.mig:
                    slots = fleet.mig[(i, g)]
                    layout = tuple(p for p, _ in slots if p)
                    busy = tuple(p for p, holder in slots if p and holder)
                    candidates.append(MigGpu(f"{i}/{g}", spec.model, layout, busy))
                elif fleet.gpu_healthy[i, g] and fleet.gpu_free[i, g] == MILLI:
                    candidates.append(MigGpu(f"{i}/{g}", spec.model))
        plan = plan_mig(demand, candidates)
        for gpu in candidates:
            i, g = (int(x) for x in gpu.id.split("/"))
            if not gpu.busy and plan.layouts[gpu.id] and (i, g) not in fleet.mig:
                fleet.configure_mig(fleet.names[i], g, plan.layouts[gpu.id])

    # --- questions and placements -------------------------------------------------------------------------

    def pool(self, slug: str) -> list[int]:
        """Indices of the nodes dedicated to an isolated tenant."""
        fleet = self.engine.fleet
        tid = fleet.tenant_ids.get(slug)
        return [] if tid is None else [i for i in range(len(fleet)) if fleet.node_owner[i] == tid]

    def carve(self, slug: str, model: str, gpus: int) -> list[str]:
        """Dedicate empty nodes of one GPU model, compact in the topology, to an isolated tenant.

        The engine's `carve_pool` looks at every model; nodes of other models are hidden from it meanwhile.
        If fewer than `gpus` are free, it takes what there is.
        """
        fleet = self.engine.fleet
        with _only_model(self.engine, model):
            empty = (fleet.gpu_free == MILLI).sum(axis=1) == fleet.gpu_count
            eligible = empty & fleet.node_healthy & (fleet.node_owner == FREE) & (fleet.gpu_count > 0)
            have = int(fleet.gpu_count[eligible].sum())
            if not have:
                return []
            return self.engine.carve_pool(slug, min(gpus, have))

    def place(self, pod: PodRequest) -> Placement | None:
        """Place one pod now, or None; an isolated tenant's pod may carve a node for itself first."""
        placement = self.engine.place(pod)
        isolated = pod.tier == Tier.ISOLATED and pod.num_gpu and pod.gpu_models
        if placement is None and isolated and self.carve(pod.tenant, next(iter(pod.gpu_models)), pod.num_gpu):
            placement = self.engine.place(pod)
        return placement

    def place_gang(self, gang: GangRequest) -> list[Placement] | None:
        """Place every pod of a gang in one topology domain, or none; isolated tenants carve as needed."""
        placements = self.engine.place_gang(gang)
        first = gang.pods[0]
        if placements is None and first.tier == Tier.ISOLATED:
            need = sum(p.num_gpu for p in gang.pods)
            if self.carve(first.tenant, next(iter(first.gpu_models)), need):
                placements = self.engine.place_gang(gang)
        return placements

    def release(self, pod_name: str) -> None:
        self.engine.release(pod_name)

    def scratch(self) -> FleetModel:
        """A copy to try things on; the model it came from is untouched."""
        engine = copy.deepcopy(self.engine)
        return FleetModel(self.host_cluster, engine, self.nodes, self.gpus, list(self.isolated), self.pods)

    def holding(self, placement: Placement) -> Holding:
        """The database view of a placement: node row, GPU UUIDs, MIG instance and layout, milli."""
        fleet = self.engine.fleet
        node = self.nodes[placement.node]
        uuids = [self.gpus[(placement.node, g)].uuid for g in placement.gpus]
        if placement.mig_slot is None:
            return Holding(node, uuids, None, placement.gpu_milli, [])
        layout = [p for p, _ in fleet.mig[(placement.node_index, placement.gpus[0])] if p]
        slices = profile(fleet.specs[placement.node_index].model, layout[placement.mig_slot]).compute
        # A MIG slice holds its compute share of the GPU: 1g of 7 slices is 143 milli.
        return Holding(node, uuids, placement.mig_slot, round(MILLI * slices / 7), layout)


def _request(pod: Pod) -> PodRequest:
    """The engine's request for a recorded pod, under its tenant and trust tier."""
    slug = pod.tenant.slug if pod.tenant else ""
    tier = pod.tenant.trust_tier if pod.tenant else Tier.TRUSTED
    return pod_request(engine_name(pod.namespace, pod.name), pod.gpu_class, pod_units(pod), slug, tier)


@contextmanager
def _only_model(engine: Engine, model: str) -> Iterator[None]:
    """Hide nodes of other GPU models (as if quarantined) for the block; their health is put back after."""
    fleet = engine.fleet
    hidden = [n for i, n in enumerate(fleet.names) if fleet.specs[i].model != model and fleet.node_healthy[i]]
    for name in hidden:
        fleet.quarantine_node(name)
    try:
        yield
    finally:
        for name in hidden:
            fleet.quarantine_node(name, quarantined=False)


def _node_spec(node: Node, gpus: dict[tuple[str, int], Gpu]) -> NodeSpec:
    own = [g for (name, _), g in gpus.items() if name == node.name]
    models = {g.gpu_model.slug for g in own}
    if len(models) > 1:
        raise EngineError(f"node mixes GPU models {sorted(models)}", f"node {node.name}")
    topology = Topology(node.zone, node.block, node.rack, node.nvlink_domain)
    return NodeSpec(node.name, node.cpu_milli, node.memory_mib, len(own), next(iter(models), ""), topology)


@dataclass
class _ClusterFacts:
    """What the database says of one host cluster, for its fleet model."""

    nodes: dict[str, Node] = field(default_factory=dict)  # by name, in name order
    gpus: dict[tuple[str, int], Gpu] = field(default_factory=dict)  # by (node name, index)
    pods: list[Pod] = field(default_factory=list)  # running, in start order
    isolated: list[str] = field(default_factory=list)  # slugs of the live isolated tenants
    isolated_guarantees: dict[str, dict[str, int]] = field(default_factory=dict)  # slug -> model -> GPUs
    dedicated: dict[str, list[str]] = field(default_factory=dict)  # slug -> nodes dedicated to it, by name
    mig_guarantees: dict[str, int] = field(default_factory=dict)  # MIG class -> instances (shared pool)


@dataclass
class _Facts:
    """The facts of several host clusters, read with one query per kind whatever their number."""

    by_cluster: dict[int, _ClusterFacts]

    def of(self, host_cluster: HostCluster) -> _ClusterFacts:
        return self.by_cluster.get(host_cluster.pk) or _ClusterFacts()

    @classmethod
    def read(cls, host_clusters: Sequence[HostCluster], at: datetime) -> _Facts:
        ids = [c.pk for c in host_clusters]
        facts: dict[int, _ClusterFacts] = defaultdict(_ClusterFacts)
        nodes = {}
        # A node gone from its cluster (kept as history) is not part of the model: nothing can run there.
        for node in Node.objects.filter(host_cluster__in=ids).exclude(state=Node.State.GONE).order_by("name"):
            facts[node.host_cluster_id].nodes[node.name] = node
            nodes[node.pk] = node
        # Each GPU gets its node and model from the rows read once, not from a join repeating them per GPU.
        models = {m.pk: m for m in GpuModel.objects.all()}
        for gpu in Gpu.objects.filter(node_id__in=nodes):
            gpu.node, gpu.gpu_model = nodes[gpu.node_id], models[gpu.gpu_model_id]
            facts[gpu.node.host_cluster_id].gpus[(gpu.node.name, gpu.index)] = gpu
        for pod in running_pods(ids, at):
            if pod.node_id in nodes:
                facts[pod.host_cluster_id].pods.append(pod)
        # Only isolated tenants change the layout (nodes dedicated to them); the others' tiers come with
        # their pods.
        live = Tenant.objects.filter(
            cluster__host_cluster__in=ids, state__in=LIVE_STATES, trust_tier=Tenant.TrustTier.ISOLATED
        )
        for cluster, slug in live.values_list("cluster__host_cluster", "slug"):
            facts[cluster].isolated.append(slug)
        quotas = Quota.objects.filter(tenant__cluster__host_cluster__in=ids, tenant__state__in=LIVE_STATES)
        isolated = (
            quotas.filter(tenant__trust_tier=Tenant.TrustTier.ISOLATED, gpu_class__kind=GpuClass.Kind.WHOLE)
            .values_list("tenant__cluster__host_cluster", "tenant__slug", "gpu_class__gpu_model__slug")
            .annotate(n=Sum("guaranteed"))
            .order_by("tenant__cluster__host_cluster", "tenant__slug", "gpu_class__gpu_model__slug")
        )
        for cluster, slug, model, n in isolated:
            if n:
                facts[cluster].isolated_guarantees.setdefault(slug, {})[model] = n
        rows = DedicatedNode.objects.filter(node__host_cluster__in=ids).order_by("node__name")
        for cluster, slug, name in rows.values_list("node__host_cluster", "tenant__slug", "node__name"):
            facts[cluster].dedicated.setdefault(slug, []).append(name)
        # Instances per MIG class guaranteed to tenants of the shared pool (isolated tenants run whole GPUs).
        mig = (
            quotas.filter(gpu_class__kind=GpuClass.Kind.MIG)
            .exclude(tenant__trust_tier=Tenant.TrustTier.ISOLATED)
            .values_list("tenant__cluster__host_cluster", "gpu_class__name")
            .annotate(n=Sum("guaranteed"))
            .order_by("tenant__cluster__host_cluster", "gpu_class__name")
        )
        for cluster, name, n in mig:
            if n:
                facts[cluster].mig_guarantees[name] = n
        return cls(dict(facts))


def running_pods(host_cluster_ids: Sequence[int], at: datetime) -> list[Pod]:
    """Pods of these host clusters started by `at` and not finished by then."""
    return list(
        Pod.objects.filter(host_cluster__in=host_cluster_ids, started_at__lte=at)
        .filter(Q(finished_at__isnull=True) | Q(finished_at__gt=at))
        .select_related("tenant", "gpu_class__gpu_model", "node")
        .order_by("started_at", "id")
    )


# --- fleet figures for /fleet/capacity/ -----------------------------------------------------------------


@dataclass(frozen=True)
class ClassFigures:
    """What the engine sees of one GPU class now, in units of the class (docs/api.md, /fleet/capacity/)."""

    allocated: int = 0  # held by running simulated pods
    free: int = 0  # a new pod of a tenant in the shared pool could take now
    largest_free_on_node: int = 0  # most free units on one node: the biggest single pod that fits now
    largest_free_in_nvlink_domain: int = 0  # most free units in one NVLink domain: the biggest tight gang


def class_figures(
    models: Sequence[FleetModel], classes: Sequence[GpuClass] | None = None
) -> dict[str, ClassFigures]:
    """Allocated, free and fragmentation figures per GPU class (all, or `classes`), summed over the fleet
    models given; allocated counts the pods each model was built with."""
    allocated: Counter[str] = Counter()
    for model in models:
        for pod in model.pods:
            allocated[pod.gpu_class.name] += pod_units(pod)
    out = {}
    if classes is None:
        classes = list(GpuClass.objects.select_related("gpu_model"))
    for gpu_class in classes:
        per_node: Counter[tuple[int, str]] = Counter()
        per_domain: Counter[tuple[int, tuple[str, ...]]] = Counter()
        for k, model in enumerate(models):
            for node, domain, units in _free_units(model, gpu_class):
                per_node[(k, node)] += units
                per_domain[(k, domain)] += units
        out[gpu_class.name] = ClassFigures(
            allocated[gpu_class.name],
            sum(per_node.values()),
            max(per_node.values(), default=0),
            max(per_domain.values(), default=0),
        )
    return out


def _free_units(model: FleetModel, gpu_class: GpuClass) -> Iterator[tuple[str, tuple[str, ...], int]]:
    """(node, NVLink domain, free units of the class) for usable shared-pool nodes of the class's model."""
    fleet = model.engine.fleet
    share = unit_milli(gpu_class)
    for i, spec in enumerate(fleet.specs):
        if spec.model != gpu_class.gpu_model.slug or not fleet.node_healthy[i] or fleet.node_owner[i] != FREE:
            continue
        units = 0
        for g in range(spec.gpus):
            if not fleet.gpu_healthy[i, g]:
                continue
            if gpu_class.kind == GpuClass.Kind.MIG:
                slots = fleet.mig.get((i, g), [])
                units += sum(1 for p, holder in slots if p == gpu_class.mig_profile and holder is None)
            elif gpu_class.kind in (GpuClass.Kind.SHARED, GpuClass.Kind.FRACTION):
                units += max(0, int(fleet.gpu_free[i, g])) // share
            else:
                units += int(fleet.gpu_free[i, g] == MILLI)
        yield spec.name, spec.topology.domain("nvlink", spec.name), units


def fleet_models(host_cluster: HostCluster | None = None) -> list[FleetModel]:
    """The fleet model of every host cluster in service that has nodes (or of the one given, if so: a retired
    one is no capacity); a constant number of queries whatever the number of host clusters."""
    clusters = serving_host_clusters().filter(nodes__isnull=False).distinct().order_by("name")
    if host_cluster is not None:
        clusters = clusters.filter(pk=host_cluster.pk)
    return FleetModel.build_many(list(clusters))


def gpus_for(gpu_class: GpuClass, units: int) -> int:
    """Whole GPUs `units` of a class take when packed alone (as quota admission counts them)."""
    return math.ceil(units / gpu_class.units_per_gpu())


def capacity_rows(host_cluster: HostCluster | None = None) -> list[dict[str, object]]:
    """/fleet/capacity/: quota admission's table (tenants.capacity), one row per host cluster and GPU class,
    with the engine's figures for that host cluster."""
    models = fleet_models(host_cluster)
    classes = list(GpuClass.objects.select_related("gpu_model"))
    figures = {m.host_cluster.name: class_figures([m], classes) for m in models}
    out = health.quarantine_reasons_by_model(host_cluster)
    return [
        {
            **asdict(row),
            **asdict(figures.get(row.host_cluster, {}).get(row.gpu_class, ClassFigures())),
            **_out(out.get((row.host_cluster, row.gpu_model), {})),
        }
        for row in capacity_table(host_cluster, classes=classes)
    ]


def _out(reasons: dict[str, int]) -> dict[str, object]:
    """The model's GPUs out of service in that host cluster, and why (`health.selectors`)."""
    return {"quarantined_gpus": sum(reasons.values()), "quarantine_reasons": reasons}
