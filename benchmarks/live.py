"""Benchmark of the live view of a Kubernetes host cluster: ``python -m benchmarks.live [--trace CSV]``.

A stand-in host cluster (the Kubernetes API stand-in of the tests, `tests/kube_emulator.py`, on loopback)
with ``--nodes`` GPU nodes of 8 GPUs, and a churn of ``--events-per-hour`` pod events (a creation or a
deletion each) drawn from the openb trace (default: ``openb_pod_list_default.csv`` of the shared data, as
`benchmarks.placement`): its GPU pods that lived under an hour, in the trace's creation order, each with the
trace's own lifetime (``deletion_time - creation_time``), arriving evenly spaced at the rate that makes
that many events in the hour. A pod is placed first-fit on the GPUs (its GPU indexes in the
``gpucloud.io/gpu-index`` annotation, a fraction in ``gpucloud.io/gpu-milli``), created bound and
``Running`` with its ``startTime``, then ended ``Succeeded`` with its container's ``finishedAt`` and
deleted: three watch events per pod. Times in the objects are the trace's (virtual), to the second.

Measured, in one run:

- **absorbed**: every watch event of the hour replayed into a `LiveView` (rows written to PostgreSQL), on one
  core: events per second, wall and this process's CPU; the stand-in's own serving is timed apart;
- **delay**: paced at the churn's rate in real time, from the stand-in storing a pod to its row committed
  (what the portal's "in use" reads: `fleet.selectors.units_in_use`, whose own query time is added);
- **memory**: what the `LiveView` holds (tracemalloc) and the `fleet.Pod` table's bytes per row;
- **exactness**: each pod's billed seconds (finished - started, from the view) against the trace, and what a
  30 s scrape interval's half-interval edges would bill for the same pods (the anchor: ±30 s per pod, and
  pods shorter than a scrape unseen).

It creates its own host cluster and tenants (``bench-live``) and deletes them afterwards. Point
``DATABASE_URL`` at a scratch database that has been migrated (``python manage.py migrate``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import threading
import time
import tracemalloc
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpucloud.settings")
django.setup()

import numpy as np  # noqa: E402
from django.db import connection, transaction  # noqa: E402

import tests.kube_emulator as stand_in  # noqa: E402
from benchmarks.placement.__main__ import DEFAULT_PODS  # noqa: E402
from benchmarks.placement.trace import read_pods  # noqa: E402
from fleet.models import Gpu, GpuModel, HostCluster, Node, Pod, PodWatch  # noqa: E402
from fleet.selectors import units_in_use  # noqa: E402
from gpucloud.kube.api import KubeApi, RetryPolicy, api_client_for_url  # noqa: E402
from placement.extender.feed import ClusterFeed  # noqa: E402
from placement.live.view import LiveView  # noqa: E402
from tenants.models import Tenant, TenantCluster  # noqa: E402

T0 = datetime(2026, 12, 1, tzinfo=UTC)
GPUS = 8
TENANTS = 50
SCRAPE = 30  # the anchor: dcgm-exporter's default collection interval, seconds
MODEL = "a100-80gb"
RETRY = RetryPolicy(attempts=2, timeout_seconds=30.0)


@dataclass(frozen=True)
class Life:
    name: str
    namespace: str
    start: int  # seconds after T0
    end: int
    gpus: int
    milli: int


@dataclass(frozen=True)
class Edge:
    t: int
    kind: str  # "create" | "delete"
    life: Life


def churn(path: Path, events: int) -> list[Edge]:
    """The edges of the hour (see the module docstring), in time order."""
    pods = [
        p
        for p in read_pods(path)
        if p.request.num_gpu
        and p.created is not None
        and p.deleted is not None
        and 0 < p.deleted - p.created < 3600
    ]
    pods.sort(key=lambda p: (p.created, p.request.name))
    rate = events / 2 / 3600  # arrivals per second, before the tail that ends after the hour
    while True:
        edges: list[Edge] = []
        for k in range(10**7):
            start = int(k / rate)
            if start >= 3600:
                break
            p = pods[k % len(pods)]
            life = Life(
                f"p{k:06d}",
                f"tenant-{k % TENANTS:03d}",
                start,
                start + int(p.deleted - p.created),  # type: ignore[operator]
                p.request.num_gpu,
                p.request.gpu_milli,
            )
            edges.append(Edge(life.start, "create", life))
            if life.end < 3600:
                edges.append(Edge(life.end, "delete", life))
        if len(edges) >= events:
            break
        rate *= events / len(edges)
    edges.sort(key=lambda e: (e.t, e.kind != "delete", e.life.name))
    return edges[:events]


def rfc(seconds: int) -> str:
    return (T0 + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


class Placer:
    """First fit on the stand-in's GPUs, as a scheduler would have bound the pods."""

    def __init__(self, nodes: int) -> None:
        self.free = np.full((nodes, GPUS), 1000, dtype=np.int64)
        self.held: dict[str, tuple[int, list[int], int]] = {}

    def place(self, life: Life) -> tuple[int, list[int]] | None:
        milli = 1000 if life.gpus > 1 else life.milli
        if milli >= 1000:
            fits = (self.free == 1000).sum(axis=1) >= life.gpus
        else:
            fits = (self.free >= milli).any(axis=1)
        if not fits.any():
            return None
        i = int(fits.argmax())
        gpus = [int(g) for g in np.flatnonzero(self.free[i] >= milli)[: life.gpus]]
        self.free[i, gpus] -= milli
        self.held[life.name] = (i, gpus, milli)
        return i, gpus

    def release(self, name: str) -> None:
        i, gpus, milli = self.held.pop(name)
        self.free[i, gpus] += milli


def pod_object(life: Life, node: str, gpus: list[int]) -> dict[str, Any]:
    annotations = {"gpucloud.io/gpu-index": ",".join(map(str, gpus))}
    if life.gpus == 1 and life.milli < 1000:
        annotations["gpucloud.io/gpu-milli"] = str(life.milli)
    request = {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": str(life.gpus)}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": life.name, "namespace": life.namespace, "annotations": annotations},
        "spec": {"nodeName": node, "containers": [{"name": "main", "resources": {"requests": request}}]},
        "status": {"phase": "Running", "startTime": rfc(life.start)},
    }


def play(em: stand_in.RunningEmulator, edges: list[Edge], placer: Placer, stored: dict[str, float]) -> int:
    """Write the edges into the stand-in; returns the pods refused for want of room (never created)."""
    refused: set[str] = set()
    for edge in edges:
        life = edge.life
        if edge.kind == "create":
            spot = placer.place(life)
            if spot is None:
                refused.add(life.name)
                continue
            em.put_object(pod_object(life, f"gpu-{spot[0]:04d}", spot[1]))
            stored[life.name] = time.perf_counter()
        elif life.name not in refused:
            terminated = {"terminated": {"exitCode": 0, "finishedAt": rfc(life.end)}}
            em.edit_object(
                "v1",
                "Pod",
                life.name,
                life.namespace,
                {
                    "status": {
                        "phase": "Succeeded",
                        "containerStatuses": [{"name": "main", "state": terminated}],
                    }
                },
            )
            em.remove_object("v1", "Pod", life.name, life.namespace)
            placer.release(life.name)
    return len(refused)


def setup(nodes: int) -> tuple[HostCluster, list[Tenant]]:
    host = HostCluster.objects.create(name="bench-live", driver=HostCluster.Driver.KUBERNETES)
    rows = Node.objects.bulk_create([Node(host_cluster=host, name=f"gpu-{n:04d}") for n in range(nodes)])
    model = GpuModel.objects.get(slug=MODEL)
    Gpu.objects.bulk_create(
        [
            Gpu(node=n, index=g, gpu_model=model, uuid=f"GPU-bench-{n.name}-{g}")
            for n in rows
            for g in range(GPUS)
        ],
        batch_size=5000,
    )
    tenants = Tenant.objects.bulk_create(
        [Tenant(slug=f"bench-live-{i:03d}", display_name=f"bench {i}", state="ready") for i in range(TENANTS)]
    )
    TenantCluster.objects.bulk_create(
        [
            TenantCluster(tenant=t, host_cluster=host, namespace=f"tenant-{i:03d}")
            for i, t in enumerate(tenants)
        ]
    )
    return host, tenants


def teardown(host: HostCluster, tenants: list[Tenant]) -> None:
    with transaction.atomic():
        Pod.objects.filter(host_cluster=host).delete()
        PodWatch.objects.filter(host_cluster=host).delete()
        TenantCluster.objects.filter(host_cluster=host).delete()
        Gpu.objects.filter(node__host_cluster=host).delete()
        Node.objects.filter(host_cluster=host).delete()
        Tenant.objects.filter(pk__in=[t.pk for t in tenants]).delete()
        host.delete()


def sentinels(em: stand_in.RunningEmulator, tag: str) -> None:
    """Two pods of no GPU after the events: at the first the consumer stops, the second ends its watch
    (a watch stays open once it has caught up; its stop is looked at on the next event)."""
    for n in (1, 2):
        em.put_object(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"end-{tag}-{n}", "namespace": "tenant-000"},
                "spec": {"containers": [{"name": "main"}]},
            }
        )


class Recorder:
    """A sink that only keeps the events, to time the stand-in and the view apart."""

    def __init__(self, stop: threading.Event) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.stop = stop

    def listed(
        self, items: list[dict[str, Any]], resource_version: str, asked_at: datetime | None = None
    ) -> None:
        return

    def changed(self, kind: str, item: dict[str, Any]) -> None:
        if str((item.get("metadata") or {}).get("name", "")).startswith("end-"):
            self.stop.set()
        else:
            self.events.append((kind, item))


class Timed(LiveView):
    """The view, noting when each pod's row was first written (for the delay)."""

    committed: dict[str, float]

    def changed(self, kind: str, item: Mapping[str, Any]) -> None:
        super().changed(kind, item)
        name = str((item.get("metadata") or {}).get("name"))
        self.committed.setdefault(name, time.perf_counter())


def scrape_billed(start: int, end: int) -> int:
    """What half-interval edges over 30 s scrapes (at multiples of 30 s) bill a pod: from 15 s before the
    first scrape that sees it to 15 s after the last; nothing if no scrape sees it."""
    first = -(-start // SCRAPE) * SCRAPE
    last = (-(-end // SCRAPE) - 1) * SCRAPE
    return 0 if first > last else last - first + SCRAPE


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def run(args: argparse.Namespace) -> dict[str, Any]:
    stand_in.HISTORY = 10**8  # keep every event of the hour: the watch replays them from the first version
    edges = churn(Path(args.trace), args.events_per_hour)
    em = stand_in.start_emulator()
    host, tenants = setup(args.nodes)
    try:
        for i in range(TENANTS):
            em.put_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"tenant-{i:03d}"}})
        api = KubeApi(api_client_for_url(em.url), RETRY)
        view = LiveView(host)
        start_version = ClusterFeed(api, sinks=[view]).list_pass(None)

        placer, stored = Placer(args.nodes), dict[str, float]()
        t = time.perf_counter()
        refused = play(em, edges, placer, stored)
        write_seconds = time.perf_counter() - t

        sentinels(em, "hour")
        done = threading.Event()
        recorder = Recorder(done)
        t = time.perf_counter()
        ClusterFeed(api, watch_seconds=args.watch_seconds, sinks=[recorder]).watch(None, start_version, done)
        serve_seconds = time.perf_counter() - t
        events = [e for e in recorder.events if e[0] != "BOOKMARK"]

        tracemalloc.start()
        before = tracemalloc.take_snapshot()
        view = LiveView(host)
        wall, cpu = time.perf_counter(), time.thread_time()
        for kind, item in events:
            view.changed(kind, item)
        view.save_position()
        wall, cpu = time.perf_counter() - wall, time.thread_time() - cpu
        held = sum(s.size_diff for s in tracemalloc.take_snapshot().compare_to(before, "filename"))
        tracemalloc.stop()

        exact = exactness(host, edges)
        delay = paced(em, api, host, args, placer, tenants)
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_total_relation_size('workers_simulatedpod')")
            table_bytes = cursor.fetchone()[0]
        rows = Pod.objects.count()
    finally:
        em.stop()
        teardown(host, tenants)
    creates = sum(1 for e in edges if e.kind == "create")
    return {
        "command": "python -m benchmarks.live " + " ".join(sys.argv[1:]),
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{platform.machine()} {platform.processor() or ''} {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, PostgreSQL on the same machine".replace("  ", " "),
        "nodes": args.nodes,
        "gpus": args.nodes * GPUS,
        "trace_events": len(edges),
        "pods": creates,
        "pods_refused_no_room": refused,
        "watch_events": len(events),
        "stand_in_write_s": round(write_seconds, 2),
        "stand_in_serve_s": round(serve_seconds, 2),
        "view_wall_s": round(wall, 2),
        "view_cpu_s": round(cpu, 2),
        "view_watch_events_per_s": round(len(events) / wall),
        "view_trace_events_per_s": round(len(edges) / wall),
        "required_trace_events_per_s": round(args.events_per_hour / 3600, 1),
        "view_writes": view.writes,
        "view_memory_mib": round(held / 2**20, 2),
        "pod_table_bytes_per_row": round(table_bytes / max(rows, 1)),
        **exact,
        **delay,
    }


def exactness(host: HostCluster, edges: list[Edge]) -> dict[str, Any]:
    """Billed seconds from the view against the trace, and a 30 s scrape's half-interval edges."""
    lives = {e.life.name: e.life for e in edges if e.kind == "delete"}
    rows = Pod.objects.filter(host_cluster=host, name__in=list(lives), finished_at__isnull=False)
    errors, scrape_errors, unseen = [], [], 0
    for name, started, finished in rows.values_list("name", "started_at", "finished_at"):
        life = lives[name]
        if finished is None:
            continue
        truth = life.end - life.start
        errors.append(abs((finished - started).total_seconds() - truth))
        billed = scrape_billed(life.start, life.end)
        scrape_errors.append(abs(billed - truth))
        unseen += billed == 0
    return {
        "finished_pods_checked": len(errors),
        "view_exact_pods": sum(1 for e in errors if e == 0),
        "view_max_error_s": max(errors, default=0),
        "scrape30_mean_abs_error_s": round(statistics.fmean(scrape_errors), 1) if scrape_errors else 0,
        "scrape30_max_error_s": max(scrape_errors, default=0),
        "scrape30_pods_unseen": unseen,
    }


def paced(
    em: stand_in.RunningEmulator,
    api: KubeApi,
    host: HostCluster,
    args: argparse.Namespace,
    placer: Placer,
    tenants: list[Tenant],
) -> dict[str, Any]:
    """New pods at the churn's rate in real time, a watch with the view running: store -> row delay."""
    view = Timed(host)
    view.committed = {}
    stop = threading.Event()
    feed = ClusterFeed(api, watch_seconds=args.paced_seconds + 30, sinks=[view])
    version = str(api.get("/api/v1/pods", {"limit": "1"}).get("metadata", {}).get("resourceVersion"))

    def consume() -> None:
        try:
            feed.watch(None, version, stop)
        finally:
            connection.close()

    consumer = threading.Thread(target=consume, daemon=True)
    consumer.start()
    gap = 3600 / args.events_per_hour
    stored: dict[str, float] = {}
    count = int(args.paced_seconds / gap)
    for k in range(count):
        life = Life(f"paced-{k:05d}", f"tenant-{k % TENANTS:03d}", 0, 0, 1, 1000)
        spot = placer.place(life)
        if spot is not None:
            em.put_object(pod_object(life, f"gpu-{spot[0]:04d}", spot[1]))
            stored[life.name] = time.perf_counter()
        time.sleep(gap)
    deadline = time.perf_counter() + 10
    while len([n for n in stored if n in view.committed]) < len(stored) and time.perf_counter() < deadline:
        time.sleep(0.05)
    stop.set()
    sentinels(em, "paced")
    consumer.join(10)
    delays = [(view.committed[n] - t) * 1000 for n, t in stored.items() if n in view.committed]
    ids = [t.pk for t in tenants]
    reads = []
    for _ in range(20):
        t = time.perf_counter()
        units_in_use(ids)
        reads.append((time.perf_counter() - t) * 1000)
    return {
        "paced_pods": len(stored),
        "paced_pods_seen": len(delays),
        "delay_store_to_row_ms_p50": round(percentile(delays, 0.5), 1),
        "delay_store_to_row_ms_p99": round(percentile(delays, 0.99), 1),
        "in_use_query_ms_p50": round(percentile(reads, 0.5), 1),
    }


def lines(result: dict[str, Any]) -> Iterator[str]:
    yield f"{result['command']}  ({result['date']}; {result['machine']})"
    yield (
        f"stand-in: {result['nodes']} nodes, {result['gpus']} GPUs; {result['trace_events']} trace events "
        f"({result['pods']} pods, {result['pods_refused_no_room']} found no room), {result['watch_events']} "
        "watch events"
    )
    yield (
        f"absorbed on one core: {result['view_trace_events_per_s']} trace events/s "
        f"({result['view_watch_events_per_s']} watch events/s; {result['view_cpu_s']} s CPU, "
        f"{result['view_wall_s']} s wall) — needed: {result['required_trace_events_per_s']}/s"
    )
    yield (
        f"delay stand-in -> row: p50 {result['delay_store_to_row_ms_p50']} ms, p99 "
        f"{result['delay_store_to_row_ms_p99']} ms; + 'in use' query p50 {result['in_use_query_ms_p50']} ms "
        f"({result['paced_pods_seen']}/{result['paced_pods']} paced pods seen)"
    )
    yield (
        f"memory: view {result['view_memory_mib']} MiB; "
        f"Pod table {result['pod_table_bytes_per_row']} bytes/row"
    )
    yield (
        f"billed seconds vs trace: {result['view_exact_pods']}/{result['finished_pods_checked']} exact, max "
        f"error {result['view_max_error_s']} s — anchor, 30 s scrapes: mean error "
        f"{result['scrape30_mean_abs_error_s']} s, max {result['scrape30_max_error_s']} s, "
        f"{result['scrape30_pods_unseen']} pods never seen"
    )


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.live", description=__doc__.split("\n")[0])
    parser.add_argument("--trace", default=str(DEFAULT_PODS), help="openb pod list (default: %(default)s)")
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--events-per-hour", type=int, default=50_000)
    parser.add_argument("--paced-seconds", type=int, default=20, help="real-time run for the delay")
    parser.add_argument("--watch-seconds", type=int, default=600, help="longest replay of the hour's watch")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = run(args)
    print(json.dumps(result, indent=1) if args.json else "\n".join(lines(result)))


if __name__ == "__main__":
    main()
