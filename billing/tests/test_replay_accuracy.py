"""A day of the simulated fleet replayed through its exporters, against the Pod ground truth.

The clock is fake: every 30 s of simulated time each node's exporter renders its /metrics for that time (the
same renderer its HTTP server serves; `test_collect_exporters` covers the HTTP path), and an hour of rounds is
ingested at a time with their timestamps, so a day takes seconds. With the cluster's exact pod edges the
ledger equals the ground truth exactly; without them it is within one collection interval per pod edge.
"""

from __future__ import annotations

import random
from collections import defaultdict
from datetime import timedelta

import pytest
from django.db.models import Sum

from billing.models import MICRO, UsageEntry
from billing.services.ingest import ClusterFacts, ingest_rounds
from billing.simexporter import NodeExporter, cluster_facts
from billing.tests.conftest import T0
from fleet.models import Node, Pod

INTERVAL = 30
DAY = 86_400
# (node, GPU indices, class, MIG instance, share of the GPU in thousandths): one sequence of pods each.
SLOTS = (
    ("h100-0", [0, 1], "h100-80gb", None, 1000),
    ("h100-0", [2], "h100-80gb", None, 1000),
    ("h100-0", [3], "h100-80gb.shared", None, 500),
    ("h100-0", [3], "h100-80gb.shared", None, 500),
    ("a100-0", [0], "a100-80gb.mig-3g.40gb", 1, 1000),
    ("a100-0", [0], "a100-80gb.mig-3g.40gb", 2, 1000),
    ("a100-0", [1], "a100-80gb.shared", None, 250),
)


@pytest.fixture
def day(mini, tenant_on, make_pod) -> list[Pod]:
    """Pods of two tenants, one after another on each slot, edges at arbitrary seconds, for one day."""
    tenants = [tenant_on("acme"), tenant_on("beta")]
    rng = random.Random(5)
    pods: list[Pod] = []
    for number, (node, gpus, gpu_class, gi, milli) in enumerate(SLOTS):
        start = rng.randint(1, 1800)
        while start < DAY - 3600:
            finish = min(start + rng.randint(45, 7200), DAY - 120)
            tenant = rng.choice(tenants)
            pods.append(
                make_pod(
                    f"p{number}-{len(pods)}",
                    f"tenant-{tenant.slug}",
                    gpu_class,
                    node,
                    gpus,
                    T0 + timedelta(seconds=start),
                    T0 + timedelta(seconds=finish),
                    gi=gi,
                    milli=milli,
                    tenant=tenant,
                )
            )
            start = finish + rng.randint(0, 900)
    return pods


def truth(pods: list[Pod]) -> dict[tuple[str, str], int]:
    """Micro GPU-seconds per (tenant, class): GPUs × share × seconds held; a MIG slice counts as one."""
    out: dict[tuple[str, str], int] = defaultdict(int)
    for pod in pods:
        assert pod.finished_at is not None
        assert pod.tenant is not None
        seconds = int((pod.finished_at - pod.started_at).total_seconds())
        units = 1 if pod.gpu_instance_id is not None else len(pod.gpu_uuids) * pod.gpu_milli / 1000
        out[(pod.tenant.slug, pod.gpu_class.name)] += round(units * seconds * MICRO)
    return dict(out)


def edges(pods: list[Pod]) -> dict[tuple[str, str], float]:
    """Pod edges per (tenant, class), weighted by the GPUs each edge moves."""
    out: dict[tuple[str, str], float] = defaultdict(float)
    for pod in pods:
        assert pod.tenant is not None
        units = 1 if pod.gpu_instance_id is not None else len(pod.gpu_uuids) * pod.gpu_milli / 1000
        out[(pod.tenant.slug, pod.gpu_class.name)] += 2 * units
    return dict(out)


def replay(mini, with_edges: bool) -> dict[tuple[str, str], int]:
    exporters = [NodeExporter(node) for node in Node.objects.filter(host_cluster=mini)]
    pods = {e.node.name: list(Pod.objects.filter(node=e.node)) for e in exporters}  # read once
    for hour_start in range(0, DAY + INTERVAL, 3600):
        times = [
            T0 + timedelta(seconds=t)
            for t in range(hour_start, min(hour_start + 3600, DAY + INTERVAL), INTERVAL)
        ]
        rounds = [
            (at, {e.node.name: e.render_pods(pods[e.node.name], at) for e in exporters}) for at in times
        ]
        facts = cluster_facts(mini, times[-1], 3600 + 2 * INTERVAL)
        if not with_edges:
            facts = ClusterFacts(fractions=facts.fractions, classes=facts.classes)
        records = ingest_rounds(mini, rounds, facts=facts)
        assert {r.status for r in records.values()} == {"ok"}
    rows = (
        UsageEntry.objects.filter(tenant__isnull=False)
        .values("tenant__slug", "gpu_class")
        .annotate(us=Sum("gpu_us"))
    )
    return {(r["tenant__slug"], r["gpu_class"]): r["us"] for r in rows}


def test_a_day_replayed_with_the_clusters_pod_edges_equals_the_ground_truth_exactly(mini, day):
    assert len(day) > 60
    assert replay(mini, with_edges=True) == truth(day)


def test_a_day_replayed_from_samples_alone_is_within_one_interval_per_pod_edge(mini, day, settings):
    measured, expected, allowed = replay(mini, with_edges=False), truth(day), edges(day)
    assert set(measured) == set(expected)
    for key, micro in expected.items():
        assert abs(measured[key] - micro) <= allowed[key] * INTERVAL / 2 * MICRO, key
    assert measured != expected  # samples alone do not see the edges: this is the half-interval rule at work
