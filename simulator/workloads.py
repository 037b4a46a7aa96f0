"""The simulated fleet's workloads: pods arriving and departing, placed with the placement engine.

For every ready tenant of a simulated host cluster, each minute of simulated time draws arrivals from a random
stream seeded by (seed, host cluster, minute, tenant): pods asking for whole GPUs, one MIG slice or one share
of a GPU class the tenant has a quota for, never beyond guaranteed + burst, and now and then a gang of pods
with a topology preference. Each pod is placed through `placement.service` (so every tenancy rule is the
engine's) and recorded as a `Pod`; its lifetime is drawn too, and `finished_at` is written when it
ends. A pod that does not fit waits, and is retried each minute of the run; pods still waiting when the run
ends are counted as pending and dropped. The same seed over the same span from the same database state gives
the same rows.

How far the workload has been generated is kept per host cluster (`SimulatedClock`), so a run never repeats a
minute: running twice is safe, and the Celery task and the `simulate_workloads` command share the clock.
"""

from __future__ import annotations

import heapq
import logging
import random
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from django.db import transaction
from django.db.models import F

from fleet.models import GpuClass, HostCluster, Pod
from fleet.selectors import SERVING
from gpucloud.locks import exclusive
from placement.engine import GangRequest, Placement, PodRequest
from placement.service import FleetModel, engine_name, pod_request, pod_units
from simulator.models import SimulatedClock
from tenants.models import Quota, Tenant

log = logging.getLogger(__name__)

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
    pending: int = 0  # still waiting when the run ended


@dataclass(frozen=True)
class Ask:
    """A pod or gang waiting to be placed: who, which class, pods of how many units, where, how long."""

    tenant: Tenant
    gpu_class: GpuClass
    name: str
    sizes: tuple[int, ...]  # units per pod; several pods make a gang
    lifetime: timedelta
    level: str = "rack"
    required: bool = False

    @property
    def units(self) -> int:
        return sum(self.sizes)


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
    waiting: list[Ask] = field(default_factory=list)
    summary: Summary = field(default_factory=Summary)


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
) -> Summary:
    """Generate and place the workload of a host cluster up to `until` (exclusive), minute by minute.

    Starts where the cluster's clock stands, or at `start` if that is later (the first time: `start`, or one
    step before `until`); with `catch_up`, a clock further behind than that jumps forward (nothing is
    simulated for the gap). Minutes already simulated are never simulated again. Holds a lock per host
    cluster for the run.
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
        at = begin
        while at < end:
            _step(run, at)
            at += STEP
            if run.summary.steps % STEPS_PER_WRITE == 0 or at >= end:
                _write(run, at)
        run.summary.pending = sum(len(ask.sizes) for ask in run.waiting)
        if run.summary.pending:
            log.info(
                "simulated pods left pending", extra={"host_cluster": host_cluster.name, **vars(run.summary)}
            )
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
    return run


def _allowed(quota: Quota) -> bool:
    """Isolated tenants run whole GPUs only (their trust tier's definition)."""
    return quota.tenant.trust_tier != Tenant.TrustTier.ISOLATED or quota.gpu_class.kind == GpuClass.Kind.WHOLE


def _step(run: _Run, at: datetime) -> None:
    """One minute: pods whose time is up end, waiting pods retry, new pods arrive (in memory)."""
    _finish(run, at)
    waiting, run.waiting = run.waiting, []
    arrivals = [ask for tenant in run.tenants for ask in _arrivals(run, tenant, at)]
    run.summary.arrived += sum(len(ask.sizes) for ask in arrivals)
    for ask in [*waiting, *arrivals]:
        if not _place(run, ask, at):
            run.waiting.append(ask)
    run.summary.steps += 1


def _write(run: _Run, until: datetime) -> None:
    """Write the pods started and ended since the last write, and move the clock, in one transaction."""
    with transaction.atomic():
        Pod.objects.bulk_create(run.new)
        # finished_at is the planned end, not the step that noticed it: the ground truth is to the second.
        Pod.objects.filter(pk__in=run.finished, finished_at__isnull=True).update(
            finished_at=F("ends_at"), phase=Pod.Phase.SUCCEEDED
        )
        SimulatedClock.objects.update_or_create(host_cluster=run.host_cluster, defaults={"until": until})
    run.new, run.finished = [], []


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
        asks.append(Ask(tenant, quota.gpu_class, name, sizes, steps * STEP, level, required))
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
    """Place a pod or a whole gang through the engine and record it; False if it does not fit now."""
    tenant = ask.tenant
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
        created_at=at,
        scheduled_at=at,
        started_at=at,
        ends_at=at + ask.lifetime,
    )
    run.new.append(row)
    run.rows[pod.name] = row
    units = pod.num_gpu if ask.gpu_class.kind == GpuClass.Kind.WHOLE else 1
    heapq.heappush(run.ends, (at + ask.lifetime, pod.name, ask.tenant.pk, ask.gpu_class.pk, units))
