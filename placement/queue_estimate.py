"""Whether a workload could start, and when: the estimated start of a tenant's waiting workloads and of a new
one (docs/placement.md, "Queue estimates"). Nothing here writes to the database.

The estimate is a replay through the placement engine on a scratch copy of the fleet model (`replay`): the
running pods end at their expected ends in time order, each end releases its GPUs, and after each one the
queue is tried in order (Kueue's BestEffortFIFO: a later workload that fits may start before an earlier one
that does not); the first moment a workload fits is its estimated start, and from then on it holds its GPUs
for its expected runtime. Expected ends (`expected_ends`): a simulated pod knows its own (`Pod.ends_at`); any
other pod is expected to run its class's median runtime over the pods that finished on its host cluster in
the last week (a pod already older than that is expected to end one step from now); with no finished pod of
its class its end is unknown, and it holds its GPUs past the horizon.
"""

from __future__ import annotations

import heapq
import statistics
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.utils import timezone

from fleet.models import Gpu, GpuClass, Node, Pod
from gpucloud.errors import ValidationFailed
from placement.engine import EngineError, GangRequest, Placement, PodRequest
from placement.service import FleetModel, engine_name, pod_request, pod_units
from tenants.models import Quota, Tenant

HORIZON = timedelta(days=7)  # an estimate further out than this is "not within a week"
STEP = timedelta(minutes=1)  # a pod past its expected end is expected to end this long from now
HISTORY = timedelta(days=7)  # finished pods the median runtime is taken over
MAX_HOURS = 24 * 30
MAX_COUNT = 1024


@dataclass(frozen=True)
class Queued:
    """A workload waiting (or asked about): its pods (a gang if several), how long it holds them."""

    name: str
    pods: tuple[PodRequest, ...]
    runtime: timedelta | None  # None: unknown, it holds its GPUs past the horizon
    quota: str = ""  # the quota it counts against (`quota_key`), if any
    units: int = 0  # units of that quota it takes
    level: str = "rack"
    required: bool = False


def quota_key(tenant_id: int | None, gpu_class_id: int) -> str:
    return f"{tenant_id}:{gpu_class_id}" if tenant_id is not None else ""


Ending = tuple[datetime, str, str, int]  # (expected end, engine name, quota key, units)


@dataclass(frozen=True)
class Start:
    """When a workload is first expected to fit, and where; `at` None: not within the horizon."""

    at: datetime | None
    placements: tuple[Placement, ...] = ()


def replay(
    model: FleetModel,
    ends: Sequence[Ending],
    queue: Sequence[Queued],
    now: datetime,
    *,
    held: Mapping[str, int] | None = None,
    limits: Mapping[str, int] | None = None,
    horizon: timedelta = HORIZON,
    stop: str = "",
) -> dict[str, Start]:
    """Estimated starts of the queue, in its order, on a scratch copy of `model` (see the module docstring).

    `ends` are the expected ends of pods the model holds (an end already past counts as now); `held` the
    units each quota holds now and `limits` its guaranteed + burst: a workload starts only within its quota.
    With `stop`, the replay ends once that workload has started (those after it are then not answered).
    """
    scratch = model.scratch()
    heap = [(max(at, now), name, key, units) for at, name, key, units in ends]
    heapq.heapify(heap)
    using: Counter[str] = Counter(held or {})
    limit = dict(limits or {})
    waiting = list(queue)
    starts: dict[str, Start] = {}
    at = now
    while True:
        still = []
        for item in waiting:
            over = item.quota in limit and using[item.quota] + item.units > limit[item.quota]
            placements = None if over else _try(scratch, item)
            if placements is None:
                still.append(item)
                continue
            starts[item.name] = Start(at, tuple(placements))
            using[item.quota] += item.units
            if item.runtime is not None:
                share = [item.units // len(item.pods)] * len(item.pods)
                share[0] += item.units - sum(share)
                for pod, units in zip(item.pods, share, strict=True):
                    heapq.heappush(heap, (at + item.runtime, pod.name, item.quota, units))
        waiting = still
        if stop in starts or not waiting or not heap or heap[0][0] > now + horizon:
            break
        at = heap[0][0]
        while heap and heap[0][0] <= at:
            _, name, key, units = heapq.heappop(heap)
            using[key] -= units
            with suppress(EngineError):  # a pod the model never held (its row without a node's GPUs)
                scratch.release(name)
    for item in waiting:
        starts[item.name] = Start(None)
    return starts


def _try(model: FleetModel, item: Queued) -> list[Placement] | None:
    try:
        if len(item.pods) == 1:
            one = model.place(item.pods[0])
            return [one] if one else None
        return model.place_gang(GangRequest(item.name, item.pods, item.level, item.required))
    except EngineError:
        return None  # can never fit here: never starts


def median_runtimes(model: FleetModel, at: datetime) -> dict[int, timedelta]:
    """Median runtime per GPU class id of the pods that finished on the host cluster in the last week."""
    rows = Pod.objects.filter(
        host_cluster=model.host_cluster, finished_at__gte=at - HISTORY, finished_at__lte=at
    ).values_list("gpu_class_id", "started_at", "finished_at")
    seconds: dict[int, list[float]] = defaultdict(list)
    for class_id, started, finished in rows:
        if finished is not None:  # filtered on, but the column is nullable
            seconds[class_id].append((finished - started).total_seconds())
    return {k: timedelta(seconds=statistics.median(v)) for k, v in seconds.items()}


def expected_ends(model: FleetModel, at: datetime, medians: dict[int, timedelta]) -> list[Ending]:
    """The expected ends of the pods the model holds, by the rule of the module docstring."""
    out = []
    for pod in model.pods:
        name, key = engine_name(pod.namespace, pod.name), quota_key(pod.tenant_id, pod.gpu_class_id)
        if pod.ends_at is not None:
            out.append((pod.ends_at, name, key, pod_units(pod)))
        elif pod.gpu_class_id in medians:
            end = max(pod.started_at + medians[pod.gpu_class_id], at + STEP)
            out.append((end, name, key, pod_units(pod)))
    return out


def held_units(model: FleetModel) -> Counter[str]:
    """Units each quota holds in the model's running pods."""
    out: Counter[str] = Counter()
    for pod in model.pods:
        out[quota_key(pod.tenant_id, pod.gpu_class_id)] += pod_units(pod)
    return out


def limits_of(tenant: Tenant) -> dict[str, int]:
    """Guaranteed + burst of each of the tenant's quotas, by quota key."""
    rows = Quota.objects.filter(tenant=tenant)
    return {quota_key(tenant.pk, q.gpu_class_id): q.guaranteed + q.burst for q in rows}


def requests_for(
    name: str, gpu_class: GpuClass, units: int, tenant: Tenant, per_node: int
) -> tuple[PodRequest, ...]:
    """The pods `units` of a class take: whole GPUs in pods of at most a node's worth (a gang if several),
    one pod per unit of a MIG or shared class."""
    slug, tier = tenant.slug, tenant.trust_tier
    if gpu_class.kind != GpuClass.Kind.WHOLE:
        sizes = [1] * units
    else:
        per_node = max(per_node, 1)
        sizes = [per_node] * (units // per_node) + ([units % per_node] if units % per_node else [])
    if len(sizes) == 1:
        return (pod_request(name, gpu_class, sizes[0], slug, tier),)
    return tuple(pod_request(f"{name}-{i}", gpu_class, s, slug, tier) for i, s in enumerate(sizes))


def queued(
    name: str, gpu_class: GpuClass, units: int, tenant: Tenant, model: FleetModel, runtime: timedelta | None
) -> Queued:
    """A workload of the tenant waiting for `units` of a class, counted against its quota."""
    pods = requests_for(name, gpu_class, units, tenant, gpus_per_node(model, gpu_class))
    return Queued(name, pods, runtime, quota_key(tenant.pk, gpu_class.pk), units)


def gpus_per_node(model: FleetModel, gpu_class: GpuClass) -> int:
    """The most GPUs of the class's model one node of the host cluster has."""
    per: dict[str, int] = defaultdict(int)
    for (node, _), gpu in model.gpus.items():
        if gpu.gpu_model_id == gpu_class.gpu_model_id:
            per[node] += 1
    return max(per.values(), default=0)


@dataclass
class QuotaUse:
    """How a workload of `units` would sit in the tenant's quota of its class."""

    guaranteed: int
    burst: int
    in_use: int
    ahead: int  # units of the class the tenant has queued before this workload
    from_guarantee: int  # of the units asked, those within the guarantee
    borrowed: int  # those beyond it, borrowed from the cohort's idle GPUs (within burst)

    @property
    def limit(self) -> int:
        return self.guaranteed + self.burst


def quota_use(tenant: Tenant, gpu_class: GpuClass, units: int, model: FleetModel, ahead: int = 0) -> QuotaUse:
    """The tenant's quota of the class, what it holds now (plus `ahead` units queued before), and this ask."""
    quota = Quota.objects.filter(tenant=tenant, gpu_class=gpu_class).first()
    guaranteed, burst = (quota.guaranteed, quota.burst) if quota else (0, 0)
    in_use = sum(
        pod_units(p) for p in model.pods if p.tenant_id == tenant.pk and p.gpu_class_id == gpu_class.pk
    )
    room = max(guaranteed - in_use - ahead, 0)
    within = min(units, room)
    return QuotaUse(guaranteed, burst, in_use, ahead, within, units - within)


def healthy_gpus(model: FleetModel, gpu_class: GpuClass) -> int:
    """GPUs of the class's model on ready nodes of the host cluster, healthy."""
    return sum(
        1
        for (node, _), gpu in model.gpus.items()
        if gpu.gpu_model_id == gpu_class.gpu_model_id
        and gpu.health == Gpu.Health.HEALTHY
        and model.nodes[node].state == Node.State.READY
    )


def reason(
    gpu_class: GpuClass, units: int, use: QuotaUse, start: Start, model: FleetModel, now: datetime
) -> str:
    """Why a workload waits (or would), in plain words."""
    if units > use.limit:
        return f"quota exceeded: asks {units} × {gpu_class.name}, guarantee + burst is {use.limit}"
    if not healthy_gpus(model, gpu_class):
        return f"the host cluster {model.host_cluster.name} has no healthy GPU of class {gpu_class.name}"
    if start.at is not None and start.at > now and use.in_use + use.ahead + units > use.limit:
        return (
            f"waiting for the tenant's own pods to end: asks {units} × {gpu_class.name}, guarantee + burst is"
            f" {use.limit}, {use.in_use} in use and {use.ahead} queued before it"
        )
    if start.at is None and use.in_use + use.ahead + units > use.limit:
        return (
            f"the tenant's quota of {gpu_class.name} is full ({use.in_use} in use, {use.ahead} queued before"
            f" it, guarantee + burst {use.limit}) and those are not expected to end within"
            f" {HORIZON.days} days"
        )
    if start.at is None:
        return (
            f"{units} × {gpu_class.name} cannot be placed within {HORIZON.days} days: the pods holding"
            " them have no known end, or no node can ever host this shape"
        )
    if start.at <= now:
        return "fits now"
    if use.borrowed:
        return (
            f"waiting for {units} × {gpu_class.name} to free up: {use.in_use} of the tenant's guarantee of"
            f" {use.guaranteed} in use, {use.borrowed} must be borrowed and the cohort has none idle"
            " to lend now"
        )
    return (
        f"waiting for {units} × {gpu_class.name} to free up: within the tenant's guarantee of"
        f" {use.guaranteed}, but the GPUs are still held by running pods (others' borrowing, or"
        " fragments too small for this shape)"
    )


@dataclass
class Feasibility:
    """The answer to "N × class for T hours: can it start now; if not, when; where; which quota"."""

    tenant: Tenant
    gpu_class: GpuClass
    count: int
    hours: float
    host_cluster: str
    fits_now: bool
    estimated_start: datetime | None
    reason: str
    nodes: list[str] = field(default_factory=list)
    quota: QuotaUse | None = None


def gpu_class_named(name: str) -> GpuClass:
    gpu_class = GpuClass.objects.select_related("gpu_model").filter(name=name).first()
    if gpu_class is None:
        raise ValidationFailed.on(
            "gpu_class", f"{name!r} is not a GPU class; GET /api/v1/gpu-classes/ lists the classes"
        )
    return gpu_class


def feasibility(
    tenant: Tenant,
    gpu_class: str,
    count: int,
    hours: float,
    *,
    ahead: Sequence[tuple[GpuClass, int, str]] = (),
    at: datetime | None = None,
) -> Feasibility:
    """Could `count` units of `gpu_class` start for the tenant now, and if not when, for `hours` hours?

    `ahead`: the tenant's workloads already waiting, (class, units, name) in queue order; they go first.
    Nothing is created.
    """
    if not 1 <= count <= MAX_COUNT:
        raise ValidationFailed.on("count", f"count is 1 to {MAX_COUNT} units, not {count}")
    if not 0 < hours <= MAX_HOURS:
        raise ValidationFailed.on("hours", f"hours is more than 0 and at most {MAX_HOURS}, not {hours}")
    the_class = gpu_class_named(gpu_class)
    cluster = getattr(tenant, "cluster", None)
    if cluster is None or cluster.host_cluster is None:
        raise ValidationFailed.on("tenant", f"tenant {tenant.slug} has no host cluster yet")
    now = at or timezone.now()
    try:
        model = FleetModel.build(cluster.host_cluster, now)
    except EngineError as exc:
        raise ValidationFailed.on("tenant", f"its host cluster cannot be modelled: {exc.what}") from None
    medians = median_runtimes(model, now)
    queue = [
        queued(f"ahead-{i}", c, u, tenant, model, medians.get(c.pk)) for i, (c, u, _) in enumerate(ahead)
    ]
    ask = queued("feasibility", the_class, count, tenant, model, timedelta(hours=hours))
    # A workload asking more than guarantee + burst is never admitted (BestEffortFIFO passes it): not ahead.
    limit = quota_use(tenant, the_class, count, model).limit
    before = sum(u for c, u, _ in ahead if c.pk == the_class.pk and u <= limit)
    use = quota_use(tenant, the_class, count, model, before)
    start = Start(None)
    if count <= use.limit:
        ends = expected_ends(model, now, medians)
        held, limits = held_units(model), limits_of(tenant)
        start = replay(model, ends, [*queue, ask], now, held=held, limits=limits)[ask.name]
    return Feasibility(
        tenant,
        the_class,
        count,
        hours,
        model.host_cluster.name,
        start.at is not None and start.at <= now,
        start.at,
        reason(the_class, count, use, start, model, now),
        sorted({p.node for p in start.placements}),
        use,
    )
