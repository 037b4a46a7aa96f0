"""The simulated fleet's workloads: pods arriving and departing, placed with the placement engine.

For every ready tenant of a simulated host cluster, each minute of simulated time draws arrivals from a random
stream seeded by (seed, host cluster, minute, tenant): pods asking for whole GPUs, one MIG slice or one share
of a GPU class the tenant has a quota for, never beyond guaranteed + burst, and now and then a gang of pods
with a topology preference. Each pod is placed through `placement.service` (so every tenancy rule is the
engine's) and recorded as a `Pod`; its lifetime is drawn too, and `finished_at` is written when it
ends. The same seed over the same span from the same database state gives the same rows.

A pod or gang that does not fit waits: it is retried each minute, in arrival order, and a later one that fits
starts before it (BestEffortFIFO). Waiting asks are the simulator's queue, and like any scheduler's they are
`fleet.PendingWorkload` rows (source `simulated`), written with the pods when the queue changed and read back
when the next run starts, so an ask waits across runs (the Celery task runs one minute at a time) and the
tenant's queue (`clusters/queue.py`) lists it. A row goes when its ask is placed, or when its tenant is no
longer ready or no longer has a quota that can hold it.

Instead of the random stream, a run can take its arrivals from a script (`Arrival`: a trace replayed, as
`benchmarks/estimate.py` does with the openb trace); a scripted ask beyond its tenant's guaranteed + burst
waits until the tenant's own pods end, and one that no quota of the tenant can ever hold is refused.

How far the workload has been generated is kept per host cluster (`SimulatedClock`), so a run never repeats a
minute: running twice is safe, and the Celery task and the `simulate_workloads` command share the clock.
"""

from __future__ import annotations

import heapq
import random
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from django.db import transaction
from django.db.models import F

from fleet.models import GpuClass, HostCluster, PendingWorkload, Pod
from fleet.selectors import SERVING
from gpucloud.locks import exclusive
from placement.engine import GangRequest, Placement, PodRequest
from placement.service import FleetModel, engine_name, pod_request, pod_units
from simulator.models import SimulatedClock
from tenants.models import Quota, Tenant

STEP = timedelta(minutes=1)
STEPS_PER_WRITE = 15  # steps written in one transaction, with the clock: a crash repeats none of them
MEAN_LIFETIME_STEPS = 40  # mean pod lifetime, in steps
MAX_LIFETIME_STEPS = 8 * 60
TARGET_LOAD = 0.7  # expected share of guaranteed + burst a tenant keeps busy
GANG_CHANCE = 0.15
WHOLE_SIZES = ((1, 4), (2, 3), (4, 2), (8, 1))  # (GPUs per pod, weight)
GANG_LEVELS = (("nvlink", False), ("rack", True))  # (level, required)


@dataclass
class Summary:
    """What one run did."""

    steps: int = 0
    arrived: int = 0  # pods that asked to run (a gang counts its pods)
    placed: int = 0
    finished: int = 0
    pending: int = 0  # still waiting when the run ended (kept, as `PendingWorkload` rows)
    refused: int = 0  # scripted pods no quota of their tenant can ever hold


@dataclass(frozen=True)
class Ask:
    """A pod or gang waiting to be placed: who, which class, pods of how many units, where, how long."""

    tenant: Tenant
    gpu_class: GpuClass
    name: str
    sizes: tuple[int, ...]  # units per pod; several pods make a gang
    lifetime: timedelta
    arrived: datetime
    level: str = "rack"
    required: bool = False

    @property
    def units(self) -> int:
        return sum(self.sizes)

    def order(self) -> tuple[datetime, str, int, str]:
        """Arrival order: the minute, then the tenant (arrivals are drawn tenant by tenant), then the name
        (names of one minute differ in a counter at the end: a shorter one is an earlier one)."""
        return (self.arrived, self.tenant.slug, len(self.name), self.name)


@dataclass(frozen=True)
class Arrival:
    """A scripted arrival (a trace's pod): taken instead of the random stream's at its minute."""

    at: datetime
    tenant: str  # slug
    gpu_class: str  # class name
    name: str  # the pod's name (a gang's pods add -0, -1, …); unique over the script
    sizes: tuple[int, ...]
    lifetime: timedelta


Script = Mapping[datetime, Sequence[Arrival]]  # by the step they arrive in (`floor_step`)


@dataclass
class _Run:
    """One host cluster's simulation over a span: the fleet model and what it runs, in memory."""

    host_cluster: HostCluster
    seed: int
    model: FleetModel
    tenants: list[Tenant]
    quotas: dict[int, list[Quota]]
    held: Counter[tuple[int, int]] = field(default_factory=Counter)  # (tenant id, class id) -> units
    ends: list[tuple[datetime, str, int, int, int]] = field(default_factory=list)  # heap, by end
    rows: dict[str, Pod] = field(default_factory=dict)  # running pods by engine name
    new: list[Pod] = field(default_factory=list)  # not written yet
    finished: list[int] = field(default_factory=list)  # primary keys of written rows that ended
    waiting: list[Ask] = field(default_factory=list)  # in arrival order (`Ask.order`)
    written: set[tuple[int, str]] = field(default_factory=set)  # (tenant id, name) of the queue's rows
    script: Script | None = None
    summary: Summary = field(default_factory=Summary)

    def limit(self, tenant: Tenant, gpu_class: GpuClass) -> int:
        """Guaranteed + burst of the tenant's quota of the class (0 without one)."""
        return sum(q.guaranteed + q.burst for q in self.quotas[tenant.pk] if q.gpu_class_id == gpu_class.pk)


def simulated_host_clusters() -> list[HostCluster]:
    return list(
        HostCluster.objects.filter(SERVING, driver=HostCluster.Driver.SIMULATED, nodes__isnull=False)
        .distinct()
        .order_by("name")
    )


def clock_of(host_cluster: HostCluster) -> datetime | None:
    """How far the host cluster's workload has been simulated, if at all."""
    return SimulatedClock.objects.filter(host_cluster=host_cluster).values_list("until", flat=True).first()


def floor_step(at: datetime) -> datetime:
    """The start of the step holding `at`."""
    seconds = int(at.timestamp()) // int(STEP.total_seconds()) * int(STEP.total_seconds())
    return datetime.fromtimestamp(seconds, tz=at.tzinfo or UTC)


def advance(
    host_cluster: HostCluster,
    *,
    until: datetime,
    seed: int,
    start: datetime | None = None,
    catch_up: timedelta | None = None,
    script: Script | None = None,
) -> Summary:
    """Generate and place the workload of a host cluster up to `until` (exclusive), minute by minute.

    Starts where the cluster's clock stands, or at `start` if that is later (the first time: `start`, or one
    step before `until`); with `catch_up`, a clock further behind than that jumps forward (nothing is
    simulated for the gap). Minutes already simulated are never simulated again. Holds a lock per host
    cluster for the run. With `script`, arrivals are the script's, not the random stream's.
    """
    with exclusive(f"simulate-workloads:{host_cluster.pk}"):
        begin = floor_step(start or until - STEP)
        clock = clock_of(host_cluster)
        if clock is not None and (start is None or clock > begin):
            begin = clock
        end = floor_step(until)
        if catch_up is not None and end - begin > catch_up:
            begin = floor_step(end - catch_up)
        if begin >= end:
            return Summary()
        run = _start(host_cluster, seed, begin)
        run.script = script
        at = begin
        while at < end:
            _step(run, at)
            at += STEP
            if run.summary.steps % STEPS_PER_WRITE == 0 or at >= end:
                _write(run, at)
        run.summary.pending = sum(len(ask.sizes) for ask in run.waiting)  # kept: the callers log the summary
        return run.summary


def _start(host_cluster: HostCluster, seed: int, at: datetime) -> _Run:
    model = FleetModel.build(host_cluster, at)
    tenants = list(
        Tenant.objects.filter(cluster__host_cluster=host_cluster, state=Tenant.State.READY)
        .select_related("cluster")
        .order_by("slug")
    )
    quotas: dict[int, list[Quota]] = {t.pk: [] for t in tenants}
    for quota in Quota.objects.filter(tenant__in=tenants).select_related("gpu_class__gpu_model"):
        if quota.guaranteed + quota.burst and _allowed(quota):
            quotas[quota.tenant_id].append(quota)
    run = _Run(host_cluster, seed, model, tenants, quotas)
    running = Pod.objects.filter(host_cluster=host_cluster, finished_at__isnull=True, started_at__lte=at)
    for pod in running.select_related("gpu_class"):
        if pod.tenant_id is not None:
            run.held[(pod.tenant_id, pod.gpu_class_id)] += pod_units(pod)
        if pod.ends_at is not None:
            name = engine_name(pod.namespace, pod.name)
            run.rows[name] = pod
            heapq.heappush(
                run.ends, (pod.ends_at, name, pod.tenant_id or 0, pod.gpu_class_id, pod_units(pod))
            )
    _reload_waiting(run)
    return run


def _reload_waiting(run: _Run) -> None:
    """The asks the last run left waiting, from its `PendingWorkload` rows, in arrival order. A row whose
    tenant is no longer ready, or whose quota can no longer hold it, is not reloaded (the next write drops
    it)."""
    tenants = {t.pk: t for t in run.tenants}
    rows = PendingWorkload.objects.filter(
        host_cluster=run.host_cluster, source=PendingWorkload.Source.SIMULATED
    )
    for row in rows:
        run.written.add((row.tenant_id, row.name))
        tenant = tenants.get(row.tenant_id)
        quota = _quota_of(run, tenant, row.gpu_class)
        if tenant is None or quota is None or row.created_at is None or not row.pods:
            continue
        ask = Ask(
            tenant,
            quota.gpu_class,
            row.name,
            (row.gpus // row.pods,) * row.pods,  # the simulator's gangs are of equal pods
            timedelta(seconds=row.expected_seconds or 0),
            row.created_at,
            row.topology_level or "rack",
            row.topology_required,
        )
        if ask.units <= run.limit(tenant, ask.gpu_class):
            run.waiting.append(ask)
    run.waiting.sort(key=Ask.order)


def _quota_of(run: _Run, tenant: Tenant | None, class_name: str) -> Quota | None:
    return (
        next((q for q in run.quotas[tenant.pk] if q.gpu_class.name == class_name), None) if tenant else None
    )


def _allowed(quota: Quota) -> bool:
    """Isolated tenants run whole GPUs only (their trust tier's definition)."""
    return quota.tenant.trust_tier != Tenant.TrustTier.ISOLATED or quota.gpu_class.kind == GpuClass.Kind.WHOLE


def _step(run: _Run, at: datetime) -> None:
    """One minute: pods whose time is up end, waiting pods retry, new pods arrive (in memory)."""
    _finish(run, at)
    if run.script is None:
        # Drawn before the waiting retry: the room left for a new arrival counts the asks waiting too.
        arrivals = [ask for tenant in run.tenants for ask in _arrivals(run, tenant, at)]
        run.summary.arrived += sum(len(ask.sizes) for ask in arrivals)
    else:
        arrivals = sorted(_scripted(run, at), key=Ask.order)
    waiting, run.waiting = run.waiting, []
    for ask in [*waiting, *arrivals]:
        if not _place(run, ask, at):
            run.waiting.append(ask)
    run.summary.steps += 1


def _write(run: _Run, until: datetime) -> None:
    """Write the pods started and ended since the last write, the queue if it changed, and move the clock, in
    one transaction."""
    with transaction.atomic():
        Pod.objects.bulk_create(run.new)
        _write_waiting(run)
        # finished_at is the planned end, not the step that noticed it: the ground truth is to the second.
        Pod.objects.filter(pk__in=run.finished, finished_at__isnull=True).update(
            finished_at=F("ends_at"), phase=Pod.Phase.SUCCEEDED
        )
        SimulatedClock.objects.update_or_create(host_cluster=run.host_cluster, defaults={"until": until})
    run.new, run.finished = [], []


def _write_waiting(run: _Run) -> None:
    """Make the host cluster's simulated `PendingWorkload` rows the asks waiting now; no write if none changed
    (an ask's row never changes while it waits, so the names say it all)."""
    names = {(ask.tenant.pk, ask.name) for ask in run.waiting}
    if names == run.written:
        return
    rows = PendingWorkload.objects.filter(
        host_cluster=run.host_cluster, source=PendingWorkload.Source.SIMULATED
    )
    for tenant_id, name in run.written - names:
        rows.filter(tenant_id=tenant_id, name=name).delete()
    PendingWorkload.objects.bulk_create(
        _pending_row(run, a) for a in run.waiting if (a.tenant.pk, a.name) not in run.written
    )
    run.written = names


def _pending_row(run: _Run, ask: Ask) -> PendingWorkload:
    """An ask as its queue row: named as its pods would be (a gang's pods add -0, -1, …)."""
    pods = len(ask.sizes)
    return PendingWorkload(
        host_cluster=run.host_cluster,
        tenant=ask.tenant,
        source=PendingWorkload.Source.SIMULATED,
        namespace=ask.tenant.cluster.namespace,
        name=ask.name,
        gpu_class=ask.gpu_class.name,
        pods=pods,
        gpus=ask.units,
        message=f"{pods} pod(s) of {ask.sizes[0]} × {ask.gpu_class.name} do not fit on free GPUs yet"
        if pods > 1
        else f"{ask.sizes[0]} × {ask.gpu_class.name} does not fit on free GPUs yet",
        created_at=ask.arrived,
        expected_seconds=int(ask.lifetime.total_seconds()),
        topology_level=ask.level if pods > 1 else "",
        topology_required=ask.required and pods > 1,
    )


def _finish(run: _Run, at: datetime) -> None:
    while run.ends and run.ends[0][0] <= at:
        ends_at, name, tenant_id, class_id, units = heapq.heappop(run.ends)
        run.model.release(name)
        run.held[(tenant_id, class_id)] -= units
        row = run.rows.pop(name)
        if row.pk is None:
            row.finished_at = ends_at
        else:
            run.finished.append(row.pk)
        run.summary.finished += 1


def _arrivals(run: _Run, tenant: Tenant, at: datetime) -> list[Ask]:
    """This minute's new pods of one tenant, from its own seeded stream."""
    minute = int(at.timestamp()) // int(STEP.total_seconds())
    rng = random.Random(f"{run.seed}:{run.host_cluster.name}:{minute}:{tenant.slug}")
    asks: list[Ask] = []
    for quota in run.quotas[tenant.pk]:
        limit = quota.guaranteed + quota.burst
        mean_units = 2.5 if quota.gpu_class.kind == GpuClass.Kind.WHOLE else 1
        chance = min(0.5, TARGET_LOAD * limit / (mean_units * MEAN_LIFETIME_STEPS))
        if rng.random() >= chance:
            continue
        room = (
            limit - run.held[(tenant.pk, quota.gpu_class_id)] - _waiting_units(run, tenant, quota.gpu_class)
        )
        sizes = _sizes(rng, quota.gpu_class, room)
        if not sizes:
            continue
        level, required = rng.choice(GANG_LEVELS)
        steps = min(MAX_LIFETIME_STEPS, max(5, round(rng.expovariate(1 / MEAN_LIFETIME_STEPS))))
        name = f"sim-{minute}-{len(asks)}"
        asks.append(Ask(tenant, quota.gpu_class, name, sizes, steps * STEP, at, level, required))
    return asks


def _scripted(run: _Run, at: datetime) -> list[Ask]:
    """This minute's arrivals from the script, for ready tenants; any no quota of theirs holds is refused."""
    assert run.script is not None
    tenants = {t.slug: t for t in run.tenants}
    asks = []
    for arrival in run.script.get(at, ()):
        tenant = tenants.get(arrival.tenant)
        quota = _quota_of(run, tenant, arrival.gpu_class)
        ask = None
        if tenant is not None and quota is not None:
            lifetime = max(arrival.lifetime, STEP)
            ask = Ask(tenant, quota.gpu_class, arrival.name, arrival.sizes, lifetime, at)
        if ask is None or ask.units > run.limit(ask.tenant, ask.gpu_class):
            run.summary.refused += len(arrival.sizes)
            continue
        run.summary.arrived += len(ask.sizes)
        asks.append(ask)
    return asks


def _waiting_units(run: _Run, tenant: Tenant, gpu_class: GpuClass) -> int:
    return sum(a.units for a in run.waiting if a.tenant.pk == tenant.pk and a.gpu_class.pk == gpu_class.pk)


def _sizes(rng: random.Random, gpu_class: GpuClass, room: int) -> tuple[int, ...]:
    """Units per pod of a new arrival that stays within `room`: one pod, or a gang of two to four."""
    if room <= 0:
        return ()
    if gpu_class.kind != GpuClass.Kind.WHOLE:
        return (1,)
    if room >= 4 and rng.random() < GANG_CHANCE:
        pods = rng.choice([n for n in (2, 3, 4) if n * 2 <= room] or [2])
        per_pod = 2 if room < pods * 4 else rng.choice((2, 4))
        return (per_pod,) * pods
    options = [(size, weight) for size, weight in WHOLE_SIZES if size <= room]
    return (rng.choices([s for s, _ in options], [w for _, w in options])[0],)


def _place(run: _Run, ask: Ask, at: datetime) -> bool:
    """Place a pod or a whole gang through the engine and record it; False if it does not fit now, or not
    within the tenant's guaranteed + burst (a random arrival always is: it was drawn within the room left)."""
    tenant = ask.tenant
    if run.held[(tenant.pk, ask.gpu_class.pk)] + ask.units > run.limit(tenant, ask.gpu_class):
        return False
    names = [ask.name] if len(ask.sizes) == 1 else [f"{ask.name}-{rank}" for rank in range(len(ask.sizes))]
    namespace = tenant.cluster.namespace
    pods = [
        pod_request(engine_name(namespace, name), ask.gpu_class, size, tenant.slug, tenant.trust_tier)
        for name, size in zip(names, ask.sizes, strict=True)
    ]
    if len(pods) == 1:
        one = run.model.place(pods[0])
        placements = [one] if one else None
    else:
        placements = run.model.place_gang(GangRequest(ask.name, tuple(pods), ask.level, ask.required))
    if not placements:
        return False
    for name, pod, placement in zip(names, pods, placements, strict=True):
        _record(run, ask, name, pod, placement, at)
    run.held[(tenant.pk, ask.gpu_class.pk)] += ask.units
    run.summary.placed += len(pods)
    return True


def _record(run: _Run, ask: Ask, name: str, pod: PodRequest, placement: Placement, at: datetime) -> None:
    holding = run.model.holding(placement)
    row = Pod(
        host_cluster=run.host_cluster,
        tenant=ask.tenant,
        namespace=ask.tenant.cluster.namespace,
        name=name,
        gpu_class=ask.gpu_class,
        node=holding.node,
        gpu_uuids=holding.gpu_uuids,
        gpu_instance_id=holding.gpu_instance_id,
        gpu_milli=holding.gpu_milli,
        mig_layout=holding.mig_layout,
        created_at=ask.arrived,  # it may have waited since
        scheduled_at=at,
        started_at=at,
        ends_at=at + ask.lifetime,
    )
    run.new.append(row)
    run.rows[pod.name] = row
    units = pod.num_gpu if ask.gpu_class.kind == GpuClass.Kind.WHOLE else 1
    heapq.heappush(run.ends, (at + ask.lifetime, pod.name, ask.tenant.pk, ask.gpu_class.pk, units))
