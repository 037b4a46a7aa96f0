"""Partition plans for the nodes of a Kubernetes host cluster: which MIG layout each GPU gets, which nodes are
time-sliced, and which of those changes may be made now.

The MIG planner (`mig.plan_mig`) chooses layouts per GPU; this module works at the level the GPU Operator
acts on, the node: the MIG manager reconfigures a node when its `nvidia.com/mig.config` label changes and
the device plugin re-reads its sharing config when `nvidia.com/device-plugin.config` changes. So:

- a node that runs pods holding GPUs is *busy*; none of its GPUs is reconfigured (the API does not say which
  GPU a pod holds, so the whole node counts). Its MIG instances count as held by running work, so the
  planner keeps them and packs new demand on idle GPUs first; when the demand does not fit on idle GPUs,
  the busy nodes with the fewest GPU pods that would hold it are *cordoned for MIG* (`drain`): no new pod
  lands there, and once their pods finish they are idle and the next pass lays them out;
- a node whose MIG config is not gpucloud's (set by hand, or by another tool) is never touched; the slices
  it advertises are subtracted from the demand;
- at most `max_changes` nodes are being changed at once (counting those still `pending`);
- a node whose last change failed waits out its backoff (the caller says which nodes are due for a retry);
- a GPU out of service (quarantined, or on a node that is not ready: `unavailable`) is no one's to plan on: it
  gets no MIG slices and counts for no time-sliced capacity. On a node that may change, its index is laid
  out with MIG disabled; on a node that must not change now (busy, held, in flight) it keeps the layout it
  has until the node may change, but its slices are never counted as supply for the demand.

Pure: no Django, no Kubernetes client; the reconciler (clusters/partitions/gpu_pass.py) feeds it what it
observed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from placement.engine.mig import COMPUTE_SLICES, MODELS, MigGpu, plan_mig

Layout = tuple[str, ...]  # profiles of one GPU; () = MIG disabled
Layouts = tuple[Layout, ...]  # MIG layout per GPU index


@dataclass(frozen=True)
class PartitionNode:
    """A GPU node as the partition planner sees it."""

    name: str
    model: str  # catalog slug of its GPUs ("" when not in the catalog)
    gpus: int
    mig_capable: bool
    layouts: Layouts  # what it is configured to now (the layout its label names)
    busy: bool = False  # runs pods that hold GPUs
    managed: bool = True  # False: its MIG config is someone else's, never changed
    sharing: bool = False  # time-sliced by gpucloud now
    in_flight: bool = False  # a MIG change gpucloud asked for has not finished yet
    held: str = ""  # why it must not change now (backoff after a failure…); "" when it may
    retry: bool = False  # its last MIG change failed and is due to be tried again
    pods: int = 0  # pods holding its GPUs (busy nodes with fewer go first when one must be drained)
    cordoned: bool = False  # cordoned for MIG already (kept so, rather than cordoning another node)
    foreign_slices: Mapping[str, int] = field(default_factory=dict)  # slices advertised by an unmanaged node
    unavailable: frozenset[int] = frozenset()  # indexes of its GPUs out of service (quarantined)

    def whole(self) -> Layouts:
        return tuple(() for _ in range(self.gpus))

    @property
    def fixed(self) -> bool:
        """Its layout must not change now."""
        return self.busy or bool(self.held) or self.in_flight

    @property
    def in_service(self) -> int:
        """GPUs that may carry demand (the others are quarantined)."""
        return sum(1 for index in range(self.gpus) if index not in self.unavailable)


@dataclass(frozen=True)
class NodeTarget:
    layouts: Layouts
    sharing: bool


@dataclass
class PartitionPlan:
    """Where every node should end up, which nodes change in this pass, and what cannot be done (why)."""

    targets: dict[str, NodeTarget] = field(default_factory=dict)
    apply_now: list[str] = field(default_factory=list)
    waiting: dict[str, str] = field(default_factory=dict)
    unsatisfied: dict[str, int] = field(default_factory=dict)  # class -> units no layout will hold
    shared_short: dict[str, int] = field(default_factory=dict)  # model -> GPUs short for time-slicing
    drain: list[str] = field(default_factory=list)  # busy nodes cordoned so that their layout can change


def _gpu_id(node: str, index: int) -> str:
    return f"{node}#{index}"


def _mig_candidates(nodes: Sequence[PartitionNode], sharing: set[str]) -> list[PartitionNode]:
    """Nodes whose GPUs the MIG planner may see; a busy or held node only with the layout it has."""
    out = []
    for node in nodes:
        if not (node.managed and node.mig_capable and node.model in MODELS) or node.name in sharing:
            continue
        fixed = node.busy or node.held or node.in_flight
        if fixed and not any(node.layouts):
            continue  # whole GPUs in use (or in transit): not the planner's to touch
        out.append(node)
    # Nodes already partitioned first: the planner gives new layouts to GPUs in this order.
    return sorted(out, key=lambda n: (not any(n.layouts), n.name))


def _mig_gpus(nodes: Sequence[PartitionNode]) -> list[MigGpu]:
    gpus = []
    for node in nodes:
        fixed = node.fixed
        for index in range(node.gpus):
            layout = node.layouts[index] if index < len(node.layouts) else ()
            if fixed and not layout:
                continue  # a whole GPU of a node that must not change: not the planner's to slice
            if index in node.unavailable:
                continue  # quarantined: no slices planned on it, and its slices supply nothing
            gpus.append(MigGpu(_gpu_id(node.name, index), node.model, layout, layout if fixed else ()))
    return gpus


def _mig_demand(demand: Mapping[str, int], nodes: Sequence[PartitionNode]) -> dict[str, int]:
    """Demand less what unmanaged nodes already advertise; every MIG model present gets an entry (maybe 0),
    so that idle GPUs nobody needs sliced go back to whole GPUs."""
    foreign: Counter[str] = Counter()
    for node in nodes:
        if not node.managed:
            foreign.update(node.foreign_slices)
    wanted = {name: max(0, units - foreign[name]) for name, units in demand.items()}
    for node in nodes:
        if node.managed and node.mig_capable and node.model in MODELS:
            first = sorted(MODELS[node.model])[0]
            wanted.setdefault(f"{node.model}.mig-{first}", 0)
    return wanted


def plan_partitions(
    nodes: Sequence[PartitionNode],
    mig_demand: Mapping[str, int],
    shared_gpus: Mapping[str, int],
    *,
    max_changes: int,
) -> PartitionPlan:
    """Targets for every managed node and the changes to make now. See the module docstring."""
    plan = PartitionPlan()
    by_name = {node.name: node for node in nodes}
    sharing = _keep_sharing(nodes, shared_gpus)
    candidates = _mig_candidates(nodes, sharing)
    mig = plan_mig(_mig_demand(mig_demand, nodes), _mig_gpus(candidates))
    plan.unsatisfied = {name: units for name, units in mig.unsatisfied.items() if units}
    for node in nodes:
        if not node.managed:
            continue
        layouts = node.layouts
        if node in candidates:
            layouts = tuple(_target_layout(node, mig.layouts, i) for i in range(node.gpus))
        plan.targets[node.name] = NodeTarget(layouts, node.name in sharing)
    _add_sharing(nodes, shared_gpus, sharing, plan)
    _hold_busy(by_name, mig.reconfigured_busy, plan)
    _drain(nodes, plan)
    _schedule(nodes, plan, max_changes)
    return plan


def _target_layout(node: PartitionNode, planned: Mapping[str, Layout], index: int) -> Layout:
    """A GPU's layout after the plan: a quarantined GPU of a node that must not change now keeps what it
    has (it was not given to the planner); one of a node that may change gets MIG disabled."""
    if index in node.unavailable and node.fixed:
        return node.layouts[index] if index < len(node.layouts) else ()
    return planned.get(_gpu_id(node.name, index), ())


def _drain(nodes: Sequence[PartitionNode], plan: PartitionPlan) -> None:
    """Busy MIG-capable nodes to cordon for the MIG slices no idle GPU can hold: fewest GPU pods first, as
    many as the missing compute slices need (whole nodes, ⌈slices ÷ 7⌉ GPUs at least). Nodes cordoned
    already come first, so that a pass does not trade one drained node for another."""
    missing: Counter[str] = Counter()
    for name, units in plan.unsatisfied.items():
        model, _, profile_name = name.partition(".mig-")
        if model in MODELS and profile_name in MODELS[model]:
            missing[model] += MODELS[model][profile_name].compute * units
    for model, slices in missing.items():
        gpus = -(-slices // COMPUTE_SLICES)
        busy = [
            n
            for n in nodes
            if n.model == model
            and n.busy
            and n.managed
            and n.mig_capable
            and not (n.held or n.in_flight or plan.targets[n.name].sharing)
        ]
        for node in sorted(busy, key=lambda n: (not n.cordoned, n.pods, n.name)):
            if gpus <= 0:
                break
            plan.drain.append(node.name)
            plan.waiting[node.name] = (
                f"cordoned for MIG: {node.pods} pods hold its GPUs; its layout changes once they finish"
            )
            gpus -= node.gpus


def _keep_sharing(nodes: Sequence[PartitionNode], shared_gpus: Mapping[str, int]) -> set[str]:
    """Nodes time-sliced now that stay so: busy ones always, idle ones while the demand needs them."""
    keep: set[str] = set()
    for model, wanted in shared_gpus.items():
        left = wanted
        for node in sorted(
            (n for n in nodes if n.sharing and n.managed and n.model == model),
            key=lambda n: (not n.busy, n.name),
        ):
            if left > 0 or node.busy:
                keep.add(node.name)
                left -= node.in_service
    keep |= {n.name for n in nodes if n.sharing and n.managed and n.busy}
    return keep


def _add_sharing(
    nodes: Sequence[PartitionNode], shared_gpus: Mapping[str, int], sharing: set[str], plan: PartitionPlan
) -> None:
    """Time-slice more idle whole-GPU nodes until each model's shared demand is covered (whole nodes: the
    device plugin's config applies to every GPU of a node). Nodes that cannot be MIG-partitioned first."""
    for model, wanted in shared_gpus.items():
        left = wanted - sum(n.in_service for n in nodes if n.name in sharing and n.model == model)
        free = [
            n
            for n in nodes
            if n.model == model
            and n.managed
            and n.name not in sharing
            and not (n.busy or n.held or n.in_flight)
            and not any(plan.targets[n.name].layouts)
            and not any(n.layouts)
            and n.in_service
        ]
        for node in sorted(free, key=lambda n: (n.mig_capable, n.name)):
            if left <= 0:
                break
            sharing.add(node.name)
            plan.targets[node.name] = NodeTarget(node.whole(), True)
            left -= node.in_service
        if left > 0:
            plan.shared_short[model] = left


def _hold_busy(by_name: Mapping[str, PartitionNode], busy_gpus: Sequence[str], plan: PartitionPlan) -> None:
    """A busy node keeps its layout; the planner's wish to change it is reported (with the slices it would
    have added counted as unsatisfied), never carried out."""
    for gpu_id in busy_gpus:
        name, _, index = gpu_id.rpartition("#")
        node = by_name[name]
        wanted = Counter(plan.targets[name].layouts[int(index)]) - Counter(node.layouts[int(index)])
        for profile, count in wanted.items():
            key = f"{node.model}.mig-{profile}"
            plan.unsatisfied[key] = plan.unsatisfied.get(key, 0) + count
        plan.targets[name] = NodeTarget(node.layouts, plan.targets[name].sharing)
        plan.waiting[name] = (
            "its MIG layout should change, but pods hold its GPUs: waiting for them to finish"
        )


def _changes(node: PartitionNode, target: NodeTarget) -> bool:
    return node.retry or target.layouts != node.layouts or target.sharing != node.sharing


def _schedule(nodes: Sequence[PartitionNode], plan: PartitionPlan, max_changes: int) -> None:
    """Which changes go out now: never on a busy node, never more than `max_changes` nodes in flight."""
    in_flight = sum(1 for n in nodes if n.in_flight)
    budget = max(0, max_changes - in_flight)
    for node in sorted(nodes, key=lambda n: n.name):
        target = plan.targets.get(node.name)
        if node.held and target is not None:
            plan.waiting.setdefault(node.name, node.held)
        if target is None or not _changes(node, target) or node.name in plan.waiting:
            continue
        if node.in_flight:
            plan.waiting[node.name] = "a MIG change is in progress"
        elif node.held:
            plan.waiting[node.name] = node.held
        elif node.busy:
            plan.waiting[node.name] = "its partitioning should change, but pods hold its GPUs: waiting"
        elif budget <= 0:
            plan.waiting[node.name] = f"waiting for its turn: at most {max_changes} nodes change at a time"
        else:
            plan.apply_now.append(node.name)
            budget -= 1
