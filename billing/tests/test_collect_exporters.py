"""Collection from dcgm-exporter endpoints: the simulated fleet's exporters over real HTTP on loopback."""

from __future__ import annotations

import socket
import urllib.request

import pytest
from django.db.models import Sum

from billing import dcgm
from billing.collect import collect_exporters, collect_host_cluster
from billing.metrics import METER_SCRAPES
from billing.models import MICRO, CollectionSource, ScrapeRecord, UsageEntry
from billing.simexporter import cluster_facts, stop_all
from billing.tasks import collect_usage
from billing.tests.conftest import at, gpu_uuid

pytestmark = pytest.mark.django_db(transaction=True)  # the exporters read the database from their own threads


@pytest.fixture
def workload(mini, tenant_on, make_pod):
    """acme: a whole H100 and a MIG slice; beta: two half shares of another H100."""
    acme, beta = tenant_on("acme"), tenant_on("beta")
    make_pod("train", "tenant-acme", "h100-80gb", "h100-0", [0], at(-600))
    make_pod("infer", "tenant-acme", "a100-80gb.mig-3g.40gb", "a100-0", [0], at(-600), gi=1)
    make_pod("s1", "tenant-beta", "h100-80gb.shared", "h100-0", [1], at(-600), milli=500)
    make_pod("s2", "tenant-beta", "h100-80gb.shared", "h100-0", [1], at(-600), milli=500)
    return acme, beta


def seconds(**filters) -> dict[str, int]:
    rows = UsageEntry.objects.filter(**filters).values("gpu_class").annotate(s=Sum("gpu_us"))
    return {r["gpu_class"]: r["s"] // MICRO for r in rows}


def test_each_node_serves_the_real_exporters_label_layout(workload, pool):
    exporters, _ = pool
    body = urllib.request.urlopen(exporters.targets["a100-0"], timeout=5).read().decode()
    assert (
        'GPU_I_PROFILE="3g.40gb",GPU_I_ID="1",hostname="a100-0",container="main",namespace="tenant-acme",'
        in body
    )
    result = dcgm.parse(body)
    instance = result.devices[dcgm.DeviceKey("a100-0", gpu_uuid("a100-0", 0), "1")]
    assert (instance.mig_profile, [h.pod for h in instance.holders]) == ("3g.40gb", ["infer"])
    shared = dcgm.parse(urllib.request.urlopen(exporters.targets["h100-0"], timeout=5).read())
    holders = shared.devices[dcgm.DeviceKey("h100-0", gpu_uuid("h100-0", 1), None)].holders
    assert [h.pod for h in holders] == ["s1", "s2"]
    assert result.ok
    assert shared.ok


def test_collecting_the_exporters_bills_each_tenant_by_class(mini, workload, pool):
    acme, beta = workload
    exporters, clock = pool
    for t in (0, 30, 60):
        clock.now = at(t)
        records = collect_exporters(mini, at(t), exporters.targets, cluster_facts(mini, at(t), 60))
        assert {r.status for r in records.values()} == {ScrapeRecord.Status.OK}
    assert seconds(tenant=acme) == {"h100-80gb": 60, "a100-80gb.mig-3g.40gb": 60}
    assert seconds(tenant=beta) == {"h100-80gb.shared": 60}  # two halves of one GPU for 60 s
    source = CollectionSource.objects.get(host_cluster=mini)
    assert (source.last_status, source.last_collected_at) == ("ok", at(60))


def test_a_second_collection_at_the_same_time_counts_nothing_twice(mini, workload, pool):
    exporters, clock = pool
    for t in (0, 30, 30):
        clock.now = at(t)
        collect_exporters(mini, at(t), exporters.targets)
    assert sum(seconds().values()) == 6 * 30  # six GPUs and instances (and idle) for one interval


def test_an_exporter_that_times_out_is_a_failed_scrape_and_the_other_nodes_are_kept(
    mini, workload, pool, settings
):
    settings.METER_SCRAPE_TIMEOUT = 0.3
    exporters, _ = pool
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(1)  # accepts the connection, never answers
    targets = {**exporters.targets, "h100-0": f"http://127.0.0.1:{silent.getsockname()[1]}/metrics"}
    before = METER_SCRAPES.labels("mini", "exporter", "failed")._value.get()
    try:
        records = collect_exporters(mini, at(0), targets)
    finally:
        silent.close()
    assert records["h100-0"].status == ScrapeRecord.Status.FAILED
    assert "did not answer within 0.3 s" in records["h100-0"].reason
    assert records["a100-0"].status == ScrapeRecord.Status.OK
    source = CollectionSource.objects.get(host_cluster=mini)
    assert source.last_status == "partial"
    assert "1 of 2 nodes not fully collected: h100-0:" in source.last_message
    assert METER_SCRAPES.labels("mini", "exporter", "failed")._value.get() == before + 1


def test_an_exporter_that_refuses_connections_is_a_failed_scrape(mini, workload):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    record = collect_exporters(mini, at(0), {"h100-0": f"http://127.0.0.1:{port}/metrics"})["h100-0"]
    assert record.status == ScrapeRecord.Status.FAILED
    assert "could not be reached" in record.reason


def test_the_periodic_round_starts_the_simulated_exporters_itself(mini, workload):
    try:
        records = collect_host_cluster(mini, at(0))
    finally:
        stop_all()
    assert set(records) == {"h100-0", "a100-0"}
    assert {r.source for r in records.values()} == {"exporter"}


def test_the_periodic_task_collects_every_host_cluster_on_its_schedule(mini, workload, settings):
    assert settings.CELERY_BEAT_SCHEDULE["collect-usage"] == {
        "task": "billing.collect_usage",
        "schedule": settings.METER_INTERVAL,
    }
    try:
        collect_usage()
    finally:
        stop_all()
    assert set(ScrapeRecord.objects.values_list("node", flat=True)) == {"h100-0", "a100-0"}
    assert CollectionSource.objects.get(host_cluster=mini).last_status == "ok"


def test_hami_pods_sharing_a_gpu_are_metered_by_their_declared_fractions(mini, tenant_on, make_pod, pool):
    labs = tenant_on("labs")
    make_pod("q1", "tenant-labs", "h100-80gb.hami-25", "h100-0", [2], at(-600), milli=250)
    make_pod("h1", "tenant-labs", "h100-80gb.hami-50", "h100-0", [2], at(-600), milli=500)
    exporters, clock = pool
    for t in (0, 30, 60):
        clock.now = at(t)
        collect_exporters(mini, at(t), exporters.targets, cluster_facts(mini, at(t), 60))
    # A quarter and a half of one GPU for 60 s; the last quarter is nobody's.
    assert seconds(tenant=labs) == {"h100-80gb.hami-25": 15, "h100-80gb.hami-50": 30}
