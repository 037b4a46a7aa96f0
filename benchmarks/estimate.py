"""How wrong the estimated start has been: ``python -m benchmarks.estimate [--hours 24] [--stretch S]``.

A day of the openb trace replayed on the simulated fleet (`simulator/workloads.py`), and the tenants' queue
(`clusters.queue.tenant_queue`) asked, as a tenant member would, when each waiting workload will start;
when it then starts, the difference is the estimate's error. Needs ``DATABASE_URL`` at a scratch PostgreSQL
database that has been migrated (``python manage.py migrate``); it loads the demo fleet there
(`deploy/fleets/demo.yaml`, 104 GPUs: the fleet the simulator runs by default and the tests use) and four
tenants with quotas (`TENANTS`).

Arrivals: the GPU pods of the openb trace (``openb_pod_list_default``) created in the 24 hours with the most
arrivals (``--start`` for another day, ``--hours`` for less of it), each at its ``creation_time``, holding its
GPUs for its traced lifetime (``deletion_time - creation_time``, × ``--stretch``, rounded up to a minute).
A pod goes to one of the four tenants by a hash of its name; a pod of whole GPUs asks for that many of the
tenant's whole class, a pod of a fraction of a GPU for one share of its shared class. The simulator takes
them instead of its random stream (`simulator.workloads.Arrival`) and runs in short runs, as the Celery task
does: a pod that does not fit, or not within its tenant's guaranteed + burst, waits, and its
`PendingWorkload` row stays until the simulator places it.

Every simulated minute, for each waiting workload not estimated yet, its tenant's queue is read at that
minute and the workload's estimated start kept (its first estimate); as a workload starts waiting only in a
minute something arrives, the simulator runs from one such minute to the next and the queue is read after
each. The actual start is its pod's `started_at`. Reported: workloads that waited; the median and p90
(nearest rank) absolute error of the first estimate, in minutes (with ``--latest``, of the last one too, read
at the last minute with an arrival before the workload started); workloads with no estimate (null: not
within the horizon) and how they ended; how many started late or early, and behind what (`late_causes`); and
the anchor, "start = now" (the estimate a queue without estimates leaves a user with: it starts now, as
Kueue's own status says nothing more), with its error. After the window the simulation runs on, without
arrivals, until every waiting workload has started or ``--drain`` hours have passed.

``--in-memory`` runs the earlier benchmark instead: the trace's pods on the first ``--fleet-nodes`` nodes of
the openb node list, fed to the engine in memory (`in_memory`), one queue for all and no tenants.
"""

from __future__ import annotations

import argparse
import bisect
import heapq
import json
import math
import os
import platform
import statistics
import sys
import time
import zlib
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import django
import yaml

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpucloud.settings")
django.setup()

from django.conf import settings  # noqa: E402  (after django.setup())

from benchmarks.placement.__main__ import DEFAULT_NODES, DEFAULT_PODS  # noqa: E402
from benchmarks.placement.trace import TracePod, read_nodes, read_pods  # noqa: E402
from clusters.queue import tenant_queue  # noqa: E402
from clusters.reconcile import tenants as reconcile  # noqa: E402
from core.audit import Actor  # noqa: E402
from fleet import fleet_file  # noqa: E402
from fleet.models import Gpu, GpuClass, HostCluster, PendingWorkload, Pod  # noqa: E402
from fleet.services import load_fleet  # noqa: E402
from placement.engine import Engine, EngineError  # noqa: E402
from placement.queue_estimate import Queued, replay  # noqa: E402
from placement.service import FleetModel  # noqa: E402
from simulator import workloads as simulator  # noqa: E402
from tenants.models import Tenant  # noqa: E402
from tenants.services.lifecycle import create_tenant  # noqa: E402
from tenants.services.quotas import set_quota  # noqa: E402

DAY = 86_400
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)  # simulated time: trace seconds from the window's start, from here
FLEET = Path(settings.BASE_DIR) / "deploy" / "fleets" / "demo.yaml"
ACTOR = Actor.console("benchmarks.estimate")
TRUSTED = Tenant.TrustTier.TRUSTED
# Lifetimes × this by default: the smallest of 1, 2, 3, 5 at which a quarter of the pods wait, picked on the
# day before the busiest (``--start 12686520``), not on the day it judges (BENCHMARKS.md).
STRETCH = 3.0
# Four tenants on the demo fleet (64 × H200, 40 × A100): (slug, whole class, guaranteed, burst, shared class,
# guaranteed, burst), a team-sized quota each, so that what waits waits for its tenant's quota: the trace is
# light (about 11 GPUs busy on average over its busiest day), and quotas of 24-32 GPUs left nothing waiting.
# Trusted: the tier that may hold shared classes (tenants/tiers.py).
TENANTS = (
    ("openb-a", "h200-141gb", 2, 2, "h200-141gb.shared", 2, 2),
    ("openb-b", "h200-141gb", 2, 2, "h200-141gb.shared", 2, 2),
    ("openb-c", "a100-80gb", 2, 2, "a100-80gb.shared", 2, 2),
    ("openb-d", "a100-80gb", 2, 2, "a100-80gb.shared", 2, 2),
)


def busiest_day(pods: list[TracePod]) -> int:
    """The start (a creation time) of the 24 hours holding the most arrivals."""
    times = sorted(p.created for p in pods if p.created is not None)
    best, start = 0, times[0]
    for i, t in enumerate(times):
        n = bisect.bisect_left(times, t + DAY) - i
        if n > best:
            best, start = n, t
    return start


def at(seconds: float) -> datetime:
    return EPOCH + timedelta(seconds=seconds)


def trace_window(args: argparse.Namespace) -> tuple[int, list[TracePod]]:
    """The GPU pods of the trace created in the window (``--start``, default the busiest day; ``--hours``),
    in creation order, with the window's start."""
    trace = [p for p in read_pods(args.pods) if p.created is not None and p.deleted is not None]
    trace = [p for p in trace if p.request.num_gpu]  # GPU pods: the others never wait for a GPU
    begin = args.start if args.start is not None else busiest_day(trace)
    span = args.hours * 3600
    return begin, sorted((p for p in trace if begin <= (p.created or 0) < begin + span), key=_created)


def _created(pod: TracePod) -> int:
    return pod.created or 0


def script(pods: list[TracePod], begin: int, stretch: float) -> dict[datetime, list[simulator.Arrival]]:
    """The pods as the simulator's scripted arrivals, by the minute they arrive in (see the docstring)."""
    out: dict[datetime, list[simulator.Arrival]] = {}
    for pod in pods:
        slug, whole, _, _, shared, _, _ = TENANTS[zlib.crc32(pod.request.name.encode()) % len(TENANTS)]
        fraction = pod.request.num_gpu == 1 and pod.request.gpu_milli < 1000
        seconds = math.ceil(stretch * ((pod.deleted or 0) - (pod.created or 0)) / 60) * 60
        minute = simulator.floor_step(at((pod.created or 0) - begin))
        arrival = simulator.Arrival(
            minute,
            slug,
            shared if fraction else whole,
            pod.request.name.lower(),
            (1 if fraction else pod.request.num_gpu,),
            timedelta(seconds=seconds),
        )
        out.setdefault(minute, []).append(arrival)
    return out


def fleet_document(name: str) -> dict[str, Any]:
    """The demo fleet file, or with ``small`` its first H200 node and first A100 node only (16 GPUs: the
    tenants' guaranteed + burst then add up to more than the fleet, so they wait for each other too)."""
    document: dict[str, Any] = yaml.safe_load(FLEET.read_text())
    if name == "small":
        groups = [g for g in document["spec"]["nodeGroups"] if g["name"] in ("h200-r1", "a100-r3")]
        document["spec"]["nodeGroups"] = [{**g, "count": 1} for g in groups]
    document["metadata"]["name"] = f"openb-{name}"
    return document


def setup(fleet: str) -> tuple[HostCluster, dict[int, Tenant]]:
    """The fleet and the tenants with their quotas, ready (a fresh migrated database is expected)."""
    if Tenant.objects.filter(slug__in=[t[0] for t in TENANTS]).exists():
        sys.exit(
            "the database has the benchmark's tenants already: point DATABASE_URL at a fresh migrated one"
        )
    document = fleet_document(fleet)
    loaded = load_fleet(actor=ACTOR, fleet=fleet_file.parse(document), source=FLEET.name)
    host_cluster = loaded.host_cluster
    settings.SIMULATED_PROVISION_DELAY = 0
    tenants = {}
    for slug, whole, w_guaranteed, w_burst, shared, s_guaranteed, s_burst in TENANTS:
        tenant = create_tenant(actor=ACTOR, slug=slug, trust_tier=TRUSTED, host_cluster=host_cluster)
        for name, guaranteed, burst in ((whole, w_guaranteed, w_burst), (shared, s_guaranteed, s_burst)):
            gpu_class = GpuClass.objects.get(name=name)
            set_quota(actor=ACTOR, tenant=tenant, gpu_class=gpu_class, guaranteed=guaranteed, burst=burst)
        tenants[tenant.pk] = tenant
    reconcile.reconcile_host_cluster(host_cluster)
    tenants = {t.pk: t for t in Tenant.objects.filter(pk__in=tenants).select_related("cluster")}
    not_ready = [t.slug for t in tenants.values() if t.state != Tenant.State.READY]
    if not_ready:
        sys.exit(f"tenants not ready after one reconcile pass: {', '.join(not_ready)}")
    return host_cluster, tenants


Key = tuple[int, str]  # (tenant id, workload name)


@dataclass
class Watch:
    """What the benchmark saw of the waiting workloads: when each was first estimated, and to when; with
    ``--latest``, its last estimate too."""

    first: dict[Key, tuple[datetime, datetime | None]] = field(default_factory=dict)  # (made at, estimate)
    latest: dict[Key, tuple[datetime, datetime | None]] = field(default_factory=dict)


def observe(
    watch: Watch,
    host_cluster: HostCluster,
    tenants: Mapping[int, Tenant],
    now: datetime,
    latest: bool = False,
) -> None:
    """Read the queue of each tenant with a waiting workload not estimated yet (with `latest`, of every
    tenant with a waiting workload), at `now`; keep the first estimate of each workload, and the latest."""
    rows = PendingWorkload.objects.filter(host_cluster=host_cluster, source=PendingWorkload.Source.SIMULATED)
    waiting = set(rows.values_list("tenant_id", "name"))
    new = {key for key in waiting if key not in watch.first}
    for tenant_id in sorted({tenant_id for tenant_id, _ in (waiting if latest else new)}):
        for entry in tenant_queue(tenants[tenant_id], at=now):
            key = (tenant_id, entry.name)
            if key in new:
                watch.first[key] = (now, entry.estimated_start)
            if latest and key in waiting:
                watch.latest[key] = (now, entry.estimated_start)


def actual_starts(host_cluster: HostCluster, keys: set[Key]) -> dict[Key, datetime]:
    """When each workload's pod (a gang's first) started, from the simulator's `Pod` rows."""
    out = {}
    pods = Pod.objects.filter(host_cluster=host_cluster).values_list("tenant_id", "name", "started_at")
    for tenant_id, name, started in pods:  # the trace's pods are single: a gang's name ends -0
        key = (tenant_id or 0, name.removesuffix("-0"))
        if key in keys and started is not None:
            out[key] = started
    return out


def late_causes(
    first: Mapping[Key, tuple[datetime, datetime | None]],
    started: Mapping[Key, datetime],
    pods: list[tuple[Key, int, datetime, datetime]],
) -> dict[str, int]:
    """Why workloads started after their estimate: the pods on GPUs of the same model that started between
    the estimate and the workload. Unforeseen by the tenant's queue: a later arrival of its own tenant (a
    smaller one that fit the quota's room first, BestEffortFIFO); another tenant's workload that was already
    waiting (the queue replays the tenant's own waiting workloads only); another tenant's later arrival.
    Foreseen: its tenant's own waiting workloads. Counts of late workloads per cause (one may have several);
    `pods`: (key, GPU model id, created, started)."""
    models = {key: model for key, model, _, _ in pods}
    out: Counter[str] = Counter()
    for key, (made, estimate) in first.items():
        actual = started.get(key)
        if estimate is None or actual is None or actual <= estimate:
            continue
        causes = {
            _cause(other[0] == key[0], created >= made)
            for other, model, created, begun in pods
            if model == models[key] and other != key and made <= begun < actual
        }
        out.update(causes or {"none of these"})
    return dict(sorted(out.items()))


def _cause(same_tenant: bool, later: bool) -> str:
    if same_tenant:
        return "a later arrival of its tenant" if later else "its tenant's waiting workload (replayed)"
    return "another tenant's later arrival" if later else "another tenant's waiting workload"


def score(
    first: Mapping[Key, tuple[datetime, datetime | None]], started: Mapping[Key, datetime]
) -> dict[str, Any]:
    """Errors of the first estimates against the actual starts, and of the anchor "start = now", in minutes:
    median and p90 (nearest rank); the workloads estimated null or never started, counted apart."""
    errors, anchor, waits, late = [], [], [], 0
    ends: Counter[str] = Counter()
    for key, (made, estimate) in first.items():
        actual = started.get(key)
        if estimate is None:
            ends["null estimate, started later" if actual else "null estimate, never started"] += 1
            continue
        if actual is None:
            ends["estimated, never started"] += 1
            continue
        errors.append(abs((actual - estimate).total_seconds()) / 60)
        late += actual > estimate
        anchor.append(abs((actual - made).total_seconds()) / 60)
        waits.append((actual - made).total_seconds() / 60)
    return {
        "waited": len(first),
        "scored": len(errors),
        "median_error_min": _median(errors),
        "p90_error_min": _p90(errors),
        "exact": sum(e == 0 for e in errors),
        "late": late,  # started after its estimate
        "early": sum(e > 0 for e in errors) - late,
        "anchor_now_median_error_min": _median(anchor),
        "anchor_now_p90_error_min": _p90(anchor),
        "median_wait_after_estimate_min": _median(waits),
        "not_scored": dict(sorted(ends.items())),
    }


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 1) if values else None


def _p90(values: list[float]) -> float | None:
    return round(sorted(values)[math.ceil(0.9 * len(values)) - 1], 1) if values else None


def run(args: argparse.Namespace) -> dict[str, Any]:
    """The benchmark through the simulator (see the module docstring)."""
    begin, pods = trace_window(args)
    arrivals = script(pods, begin, args.stretch)
    host_cluster, tenants = setup(args.fleet)
    clock = time.perf_counter()
    watch, totals = Watch(), simulator.Summary()
    # A workload starts waiting only in a minute something arrives: the queue is read after each such
    # minute, and the simulator runs from one to the next (any run's length gives the same rows).
    for step in sorted(arrivals):
        now = step + simulator.STEP
        _add(totals, simulator.advance(host_cluster, start=EPOCH, until=now, seed=0, script=arrivals))
        observe(watch, host_cluster, tenants, now, args.latest)
    until = EPOCH + math.ceil(args.hours * 60) * simulator.STEP
    _add(totals, simulator.advance(host_cluster, start=EPOCH, until=until, seed=0, script=arrivals))
    drained = until
    while drained < until + timedelta(hours=args.drain) and _waiting(host_cluster):
        drained += timedelta(hours=1)
        _add(totals, simulator.advance(host_cluster, until=drained, seed=0, script=arrivals))
    started = actual_starts(host_cluster, set(watch.first))
    summary = {
        "window_start_s": begin,
        "fleet": f"{args.fleet} ({Gpu.objects.filter(node__host_cluster=host_cluster).count()} GPUs)",
        "hours": args.hours,
        "stretch": args.stretch,
        "trace_pods": len(pods),
        "arrived": totals.arrived,
        "refused": totals.refused,
        "placed": totals.placed,
        **score(watch.first, started),
        "late_because": late_causes(watch.first, started, _pods(host_cluster)),
        **_latest(watch, started),
        "still_waiting_at_end": _waiting(host_cluster),
        "simulated_until": drained.isoformat(),
        "wall_seconds": round(time.perf_counter() - clock, 1),
        "machine": f"{platform.machine()} {os.cpu_count()} cpu, Python {platform.python_version()}",
    }
    print(json.dumps(summary, indent=2))
    return summary


def _add(totals: simulator.Summary, summary: simulator.Summary) -> None:
    totals.arrived += summary.arrived
    totals.placed += summary.placed
    totals.refused += summary.refused


def _pods(host_cluster: HostCluster) -> list[tuple[Key, int, datetime, datetime]]:
    rows = Pod.objects.filter(host_cluster=host_cluster, tenant__isnull=False, started_at__isnull=False)
    values = rows.values_list("tenant_id", "name", "gpu_class__gpu_model_id", "created_at", "started_at")
    return [
        ((t, name.removesuffix("-0")), c, created or begun, begun) for t, name, c, created, begun in values
    ]


def _latest(watch: Watch, started: Mapping[Key, datetime]) -> dict[str, Any]:
    if not watch.latest:
        return {}
    result = score(watch.latest, started)
    return {
        "latest_median_error_min": result["median_error_min"],
        "latest_p90_error_min": result["p90_error_min"],
    }


def _waiting(host_cluster: HostCluster) -> int:
    return PendingWorkload.objects.filter(host_cluster=host_cluster).count()


def in_memory(args: argparse.Namespace) -> dict[str, Any]:
    """The earlier, in-memory replay (``--in-memory``): the trace's pods on the first ``--fleet-nodes`` nodes
    of the openb node list, fed to the engine directly, one queue, an estimate when a pod is queued."""
    nodes = read_nodes(args.nodes)[: args.fleet_nodes]
    trace = [p for p in read_pods(args.pods) if p.created is not None and p.deleted is not None]
    trace = [p for p in trace if p.request.num_gpu]  # GPU pods: the others never wait for a GPU
    begin = args.start if args.start is not None else busiest_day(trace)
    day = sorted((p for p in trace if begin <= (p.created or 0) < begin + DAY), key=lambda p: p.created or 0)
    clock = time.perf_counter()
    model = FleetModel(HostCluster(name="openb"), Engine(nodes, workload=[p.request for p in day]), {}, {})
    check = model.engine.fleet
    day = [p for p in day if _ever_fits(check, p)]
    lifetime = {p.request.name: args.stretch * ((p.deleted or 0) - (p.created or 0)) for p in day}
    ends: list[tuple[float, str]] = []  # (end, pod) of running pods
    waiting: list[TracePod] = []
    estimates: dict[str, float | None] = {}
    errors: list[float] = []
    waits: list[float] = []  # minutes from arrival to start, of the pods that waited
    unestimated = started_on_arrival = 0
    arrivals = [(float(p.created or 0), p) for p in day]
    i = 0
    while i < len(arrivals) or waiting:
        next_end = ends[0][0] if ends else None
        next_arrival = arrivals[i][0] if i < len(arrivals) else None
        if next_end is None and next_arrival is None:
            break  # waiting pods that can never start on this fleet
        now = min(t for t in (next_end, next_arrival) if t is not None)
        while ends and ends[0][0] <= now:
            model.release(heapq.heappop(ends)[1])
        new = []
        while i < len(arrivals) and arrivals[i][0] <= now:
            new.append(arrivals[i][1])
            i += 1
        still = []
        for pod in [*waiting, *new]:
            if model.place(pod.request) is None:
                still.append(pod)
                continue
            heapq.heappush(ends, (now + lifetime[pod.request.name], pod.request.name))
            if pod in new:
                started_on_arrival += 1
            else:
                guess = estimates.pop(pod.request.name)
                waits.append((now - (pod.created or 0)) / 60)
                if guess is None:
                    unestimated += 1
                else:
                    errors.append(abs(now - guess) / 60)
        waiting = still
        for pod in new:
            if pod in waiting:
                estimates[pod.request.name] = _estimate(model, ends, waiting, pod, now, lifetime)
    wall = time.perf_counter() - clock
    errors.sort()
    summary = {
        "window_start_s": begin,
        "fleet_nodes": len(nodes),
        "fleet_gpus": int(check.total_gpus()),
        "pods": len(day),
        "started_on_arrival": started_on_arrival,
        "estimates": len(errors),
        "not_estimated": unestimated,
        "median_error_min": round(statistics.median(errors), 1) if errors else None,
        "p90_error_min": round(errors[math.ceil(0.9 * len(errors)) - 1], 1)
        if errors
        else None,  # nearest rank
        "stretch": args.stretch,
        "median_wait_min": round(statistics.median(waits), 1) if waits else None,
        "wall_seconds": round(wall, 1),
        "machine": f"{platform.machine()} {os.cpu_count()} cpu, Python {platform.python_version()}",
    }
    print(json.dumps(summary, indent=2))
    return summary


def _ever_fits(fleet: Any, pod: TracePod) -> bool:
    try:
        fleet.check_ever_fits(pod.request)
    except EngineError:  # a pod no node of the cut fleet can host is left out
        return False
    return True


def _estimate(
    model: FleetModel,
    ends: list[tuple[float, str]],
    waiting: list[TracePod],
    pod: TracePod,
    now: float,
    lifetime: dict[str, float],
) -> float | None:
    """The estimated start of `pod`, queued behind `waiting` (in order), by the product's replay."""
    ahead = waiting[: waiting.index(pod) + 1]
    queue = [Queued(p.request.name, (p.request,), timedelta(seconds=lifetime[p.request.name])) for p in ahead]
    running = [(at(t), name, "", 0) for t, name in ends]
    start = replay(model, running, queue, at(now), horizon=timedelta(days=30), stop=pod.request.name)
    moment = start[pod.request.name].at
    return None if moment is None else (moment - EPOCH).total_seconds()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=Path, default=DEFAULT_PODS)
    parser.add_argument(
        "--start", type=int, default=None, help="trace second the window starts (default: the busiest day)"
    )
    parser.add_argument("--hours", type=float, default=24.0, help="hours of the trace replayed (default 24)")
    parser.add_argument(
        "--stretch",
        type=float,
        default=None,
        help=f"multiply every lifetime (default {STRETCH}; --in-memory 1)",
    )
    parser.add_argument(
        "--drain", type=float, default=48.0, help="hours simulated after the window for the queue to empty"
    )
    parser.add_argument(
        "--fleet", choices=("demo", "small"), default="demo", help="the demo fleet, or one node of each model"
    )
    parser.add_argument(
        "--latest", action="store_true", help="also score each workload's last estimate (reads every queue)"
    )
    parser.add_argument("--in-memory", action="store_true", help="the earlier in-memory replay instead")
    parser.add_argument("--nodes", type=Path, default=DEFAULT_NODES, help="--in-memory: the node list")
    parser.add_argument("--fleet-nodes", type=int, default=8, help="--in-memory: the first N GPU nodes")
    args = parser.parse_args()
    args.stretch = args.stretch or (1.0 if args.in_memory else STRETCH)
    if args.hours <= 0 or args.stretch <= 0 or args.drain < 0:
        parser.error("--hours and --stretch must be positive, --drain not negative")
    in_memory(args) if args.in_memory else run(args)


if __name__ == "__main__":
    main()
