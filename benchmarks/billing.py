"""Database benchmarks of billing, on PostgreSQL: ``python -m benchmarks.billing ingest|usage-query``.

``ingest``: one collection round of an N-GPU fleet (the exposition of ``benchmarks.metering``: the real
exporter's label layout, pod labels, a share of MIG rows) through ``billing.services.ingest.ingest_round``:
parse, attribute, integrate with the persisted per-node state, and write scrape records, ledger rows and state
in one transaction. The first round only creates the state; the rounds after it are the steady state and are
timed.

``usage-query``: 30 days of hourly usage sums (``UsageHour``) for N GPUs (one row per GPU per hour, written
server-side with ``generate_series``; ``--rows-per-hour`` splits each into several pods' rows), then one
tenant's monthly usage by GPU class through ``billing.selectors.usage``, the query behind
``GET /api/v1/usage/``; reports p50 and p95.

Both create their own host cluster and tenants (prefix ``bench-``) and delete them afterwards. Point
``DATABASE_URL`` at a scratch database that has been migrated (``python manage.py migrate``).
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpucloud.settings")
django.setup()

from django.db import connection, transaction  # noqa: E402  (after django.setup())

from benchmarks.metering.__main__ import GPUS_PER_NODE, load_families, node_exposition  # noqa: E402
from billing import selectors  # noqa: E402
from billing.models import MeterState, ScrapeRecord, UnknownNode, UsageEntry, UsageHour  # noqa: E402
from billing.services.ingest import ingest_round  # noqa: E402
from fleet.models import HostCluster, Node  # noqa: E402
from tenants.models import Tenant, TenantCluster  # noqa: E402

T0 = datetime(2026, 5, 1, tzinfo=UTC)
TENANTS = 400


def _setup(tag: str, nodes: int = 0, tenant_count: int = TENANTS) -> tuple[HostCluster, list[Tenant]]:
    host_cluster = HostCluster.objects.create(name=f"bench-{tag}", driver=HostCluster.Driver.SIMULATED)
    Node.objects.bulk_create(
        [Node(host_cluster=host_cluster, name=f"gpu-node-{n:05d}") for n in range(1, nodes + 1)]
    )
    tenants = Tenant.objects.bulk_create(
        [
            Tenant(slug=f"bench-{tag}-{i:04d}", display_name=f"bench {i}", state="ready")
            for i in range(tenant_count)
        ]
    )
    TenantCluster.objects.bulk_create(
        [
            TenantCluster(tenant=t, host_cluster=host_cluster, namespace=f"tenant-{i:04d}")
            for i, t in enumerate(tenants)
        ]
    )
    return host_cluster, tenants


def _teardown(host_cluster: HostCluster, tenants: list[Tenant]) -> None:
    with transaction.atomic():
        UsageHour.objects.filter(host_cluster=host_cluster).delete()
        UsageEntry.objects.filter(host_cluster=host_cluster).delete()
        ScrapeRecord.objects.filter(host_cluster=host_cluster).delete()
        MeterState.objects.filter(host_cluster=host_cluster).delete()
        UnknownNode.objects.filter(host_cluster=host_cluster).delete()
        TenantCluster.objects.filter(host_cluster=host_cluster).delete()
        Node.objects.filter(host_cluster=host_cluster).delete()
        Tenant.objects.filter(pk__in=[t.pk for t in tenants]).delete()
        host_cluster.delete()


def bench_ingest(gpus: int, mig_share: float, rounds: int) -> dict[str, Any]:
    rng = random.Random(1)
    families = load_families()
    bodies = {}
    series = 0
    for node in range(1, gpus // GPUS_PER_NODE + 1):
        body, n = node_exposition(rng, node, families, mig_share, TENANTS)
        bodies[f"gpu-node-{node:05d}"] = body
        series += n
    megabytes = sum(len(b) for b in bodies.values()) / 1e6
    host_cluster, tenants = _setup(f"{os.getpid()}", nodes=len(bodies))
    try:
        timings, cpu = [], []
        for i in range(rounds + 1):
            start, start_cpu = time.perf_counter(), time.process_time()
            records = ingest_round(host_cluster, T0 + timedelta(seconds=30 * i), bodies)
            timings.append(time.perf_counter() - start)
            cpu.append(time.process_time() - start_cpu)
            assert all(r.status == "ok" for r in records.values()), "a bench round must ingest cleanly"
        rows = UsageEntry.objects.filter(host_cluster=host_cluster).count()
    finally:
        _teardown(host_cluster, tenants)
    return {
        "gpus": gpus,
        "nodes": len(bodies),
        "series": series,
        "megabytes": round(megabytes, 1),
        "first_round_s": round(timings[0], 3),
        "steady_rounds_s": [round(t, 3) for t in timings[1:]],
        "steady_median_s": round(statistics.median(timings[1:]), 3),
        "steady_median_python_cpu_s": round(statistics.median(cpu[1:]), 3),
        "ledger_rows_per_round": rows // max(1, rounds),
    }


LEDGER_SQL = """
INSERT INTO billing_usagehour (host_cluster_id, tenant_id, gpu_class, node, device, namespace, pod, hour,
                               gpu_us, util_gpu_us, millijoules)
SELECT %(cluster)s, (%(tenants)s::bigint[])[1 + g %% %(n_tenants)s],
       CASE WHEN g %% 10 = 0 THEN 'h100-80gb.mig-3g.40gb' WHEN g %% 3 = 0 THEN 'a100-80gb'
            ELSE 'h100-80gb' END,
       'gpu-node-' || (g / 8), 'GPU-' || g, 'tenant-' || (g %% %(n_tenants)s), 'job-' || g || '-' || r,
       %(start)s::timestamptz + h * interval '1 hour', 3600000000 / %(rows_per_hour)s,
       (2000000000::bigint + (g %% 7) * 100000000) / %(rows_per_hour)s, 1800000000 / %(rows_per_hour)s
FROM generate_series(0, %(last_gpu)s) AS g, generate_series(0, %(last_hour)s) AS h,
     generate_series(1, %(rows_per_hour)s) AS r
"""


def bench_usage_query(
    gpus: int, days: int, repeats: int, rows_per_hour: int = 1, tenant_count: int = TENANTS
) -> dict[str, Any]:
    host_cluster, tenants = _setup(f"{os.getpid()}", tenant_count=tenant_count)
    try:
        start = time.perf_counter()
        with connection.cursor() as cursor:
            cursor.execute(
                LEDGER_SQL,
                {
                    "cluster": host_cluster.pk,
                    "tenants": [t.pk for t in tenants],
                    "n_tenants": len(tenants),
                    "start": T0,
                    "last_gpu": gpus - 1,
                    "last_hour": days * 24 - 1,
                    "rows_per_hour": rows_per_hour,
                },
            )
            cursor.execute("VACUUM ANALYZE billing_usagehour")  # what autovacuum does after a bulk load
        load_s = time.perf_counter() - start
        rows = UsageHour.objects.filter(host_cluster=host_cluster).count()
        tenant = Tenant.objects.filter(pk=tenants[min(7, len(tenants) - 1)].pk)
        tenant_rows = UsageHour.objects.filter(tenant__in=tenant).count()
        timings = []
        result: list[dict[str, Any]] = []
        for _ in range(repeats):
            begin = time.perf_counter()
            result = list(
                selectors.usage(
                    tenants=tenant,
                    include_platform=False,
                    start=T0,
                    end=T0 + timedelta(days=days),
                    group_by="gpu_class",
                )
            )
            timings.append(time.perf_counter() - begin)
        timings.sort()
    finally:
        _teardown(host_cluster, tenants)
    return {
        "gpus": gpus,
        "days": days,
        "ledger_rows": rows,
        "rows_per_gpu_hour": rows_per_hour,
        "tenant_rows": tenant_rows,
        "load_s": round(load_s, 1),
        "classes_returned": len(result),
        "p50_ms": round(1000 * statistics.median(timings), 2),
        "p95_ms": round(1000 * timings[int(0.95 * (len(timings) - 1))], 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.billing", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    ingest = sub.add_parser("ingest", help="one collection round including the database write")
    ingest.add_argument("--gpus", type=int, default=10_000)
    ingest.add_argument("--mig-share", type=float, default=0.2)
    ingest.add_argument("--rounds", type=int, default=3)
    query = sub.add_parser("usage-query", help="one tenant's monthly usage by class over an hourly ledger")
    query.add_argument("--gpus", type=int, default=10_000)
    query.add_argument("--days", type=int, default=30)
    query.add_argument("--repeats", type=int, default=40)
    query.add_argument(
        "--rows-per-hour", type=int, default=1, help="ledger rows per GPU-hour (120: one a round)"
    )
    query.add_argument("--tenants", type=int, default=TENANTS)
    args = parser.parse_args(argv)
    if connection.vendor != "postgresql":
        print("set DATABASE_URL to a migrated PostgreSQL database", file=sys.stderr)
        return 2
    report = (
        bench_ingest(args.gpus, args.mig_share, args.rounds)
        if args.what == "ingest"
        else bench_usage_query(args.gpus, args.days, args.repeats, args.rows_per_hour, args.tenants)
    )
    python = f"{platform.python_implementation()} {platform.python_version()}"
    print(f"# {python}, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC")
    for key, value in report.items():
        print(f"{key}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
