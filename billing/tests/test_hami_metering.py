"""HAMi fractions on a Kubernetes host cluster: dcgm-exporter's rows plus HAMi's scheduler metrics, over HTTP.

dcgm-exporter shows HAMi's shared GPUs without pod labels (HAMi #112); the scheduler's allocation metrics
(fixture `hami-scheduler-legacy-metrics.prom`) say which pods hold them and how much. Both are served on
loopback and collected through `collect_host_cluster`, as configured on the cluster's `CollectionSource`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db.models import Sum

from billing import hami
from billing.collect import collect_host_cluster
from billing.models import MICRO, CollectionSource, ScrapeRecord, UsageEntry
from billing.tests.conftest import A100, Endpoints, Row, at, exposition, gpu_uuid

FIXTURE = (Path(__file__).parent / "fixtures" / "hami-scheduler-legacy-metrics.prom").read_text()
MiB = 2**20


def dcgm_bodies(t: int) -> dict[str, str]:
    """Each node's dcgm-exporter: h100-0 GPU 0 held whole by acme's `train`; HAMi's GPUs carry no pod."""
    h100 = [
        Row(gpu_uuid("h100-0", 0), pod="tenant-acme/train", index=0, energy_mj=1_000_000 + 300_000 * t),
        Row(gpu_uuid("h100-0", 1), index=1, util=0),
        Row(gpu_uuid("h100-0", 2), index=2, util=80, energy_mj=2_000_000 + 400_000 * t),
        Row(gpu_uuid("h100-0", 3), index=3, util=40),
    ]
    a100 = [Row(gpu_uuid("a100-0", i), model=A100, index=i) for i in (0, 1)]
    return {"/dcgm/h100-0": exposition("h100-0", h100), "/dcgm/a100-0": exposition("a100-0", a100)}


@pytest.fixture
def endpoints(mini) -> Iterator[Endpoints]:
    served = Endpoints()
    CollectionSource.objects.create(
        host_cluster=mini,
        kind=CollectionSource.Kind.EXPORTER,
        url=served.base + "/dcgm/{node}",
        hami_url=served.base + "/hami",
    )
    yield served
    served.stop()


def collect(mini, endpoints: Endpoints, t: int, hami_body: str | None = FIXTURE) -> dict[str, ScrapeRecord]:
    endpoints.bodies.clear()
    endpoints.bodies.update(dcgm_bodies(t))
    if hami_body is not None:
        endpoints.bodies["/hami"] = hami_body
    return collect_host_cluster(mini, at(t))


def micro(**filters: Any) -> dict[str, int]:
    rows = UsageEntry.objects.filter(**filters).values("gpu_class").annotate(s=Sum("gpu_us"))
    return {r["gpu_class"]: r["s"] for r in rows}


def test_two_tenants_sharing_an_h100_accrue_their_declared_hami_fractions(mini, tenant_on, endpoints):
    acme, beta = tenant_on("acme"), tenant_on("beta")
    for t in (0, 30, 60):
        records = collect(mini, endpoints, t)
        assert {r.status for r in records.values()} == {ScrapeRecord.Status.OK}
    assert micro(tenant=acme) == {"h100-80gb": 60 * MICRO, "h100-80gb.hami-25": 15 * MICRO}
    # h1 holds 50 % of the same GPU; `odd` asked for 30 % of another (gpumem-percentage): no catalog class,
    # so billed as a share by its measured fraction of the device's memory.
    beta_usage = micro(tenant=beta)
    assert beta_usage.keys() == {"h100-80gb.hami-50", "h100-80gb.shared"}
    assert beta_usage["h100-80gb.hami-50"] == 30 * MICRO
    assert (
        abs(beta_usage["h100-80gb.shared"] - 60 * 24467 / 81559 * MICRO) <= 2
    )  # one rounding per ledger row
    # A pod in a namespace of no tenant is billed all the same (to nobody), under its class.
    assert micro(tenant=None, namespace="ml-platform") == {"a100-80gb.hami-50": 30 * MICRO}
    shared_gpu = UsageEntry.objects.filter(device=gpu_uuid("h100-0", 2))
    per_pod = dict(shared_gpu.values_list("pod").annotate(s=Sum("gpu_us")))
    assert per_pod == {"q1": 15 * MICRO, "h1": 30 * MICRO, "": 15 * MICRO}  # the last quarter is idle
    assert sum(per_pod.values()) == 60 * MICRO  # never more than the whole GPU
    # Energy and utilisation follow the same shares: q1 gets a quarter of the GPU's 24 kJ.
    q1 = shared_gpu.filter(pod="q1").aggregate(mj=Sum("millijoules"), u=Sum("util_gpu_us"))
    assert q1 == {"mj": 6_000_000, "u": round(15 * 0.8 * MICRO)}


def test_the_same_round_collected_twice_bills_once(mini, tenant_on, endpoints):
    tenant_on("acme"), tenant_on("beta")
    for t in (0, 30, 60):
        collect(mini, endpoints, t)
    before = (UsageEntry.objects.count(), micro())
    again = collect(mini, endpoints, 60)
    assert (UsageEntry.objects.count(), micro()) == before
    assert set(again) == {"h100-0", "a100-0"}


def test_a_pod_gone_from_hamis_metrics_keeps_its_class_for_its_last_half_interval(mini, tenant_on, endpoints):
    acme = tenant_on("acme")
    without_q1 = "\n".join(line for line in FIXTURE.splitlines() if "q1" not in line)
    collect(mini, endpoints, 0)
    collect(mini, endpoints, 30)
    collect(mini, endpoints, 60, without_q1)
    # 30 s at a quarter, then the first half of the next interval (15 s) at a quarter.
    assert micro(tenant=acme)["h100-80gb.hami-25"] == round(45 * 0.25 * MICRO)
    assert not UsageEntry.objects.filter(pod="q1").exclude(gpu_class="h100-80gb.hami-25").exists()


def test_over_allocated_gpu_is_split_never_billed_beyond_the_whole(mini, tenant_on, endpoints):
    tenant_on("beta")
    uuid = gpu_uuid("h100-0", 2)
    lines = [
        f'hami_vgpu_memory_allocated_bytes{{container_index="0",device_uuid="{uuid}",namespace="tenant-beta",'
        f'node="h100-0",pod="p{i}",zone="vGPU"}} {40960 * MiB}'
        for i in range(3)
    ]
    body = "\n".join(lines) + "\n"
    for t in (0, 30, 60):
        collect(mini, endpoints, t, body)
    per_pod = dict(UsageEntry.objects.filter(device=uuid).values_list("pod").annotate(s=Sum("gpu_us")))
    assert per_pod == {"p0": 20 * MICRO, "p1": 20 * MICRO, "p2": 20 * MICRO}


def test_hami_metrics_unreadable_fail_the_round_with_the_reason(mini, tenant_on, endpoints):
    tenant_on("acme")
    records = collect(mini, endpoints, 0, hami_body=None)  # the scheduler's endpoint answers 404
    assert {r.status for r in records.values()} == {ScrapeRecord.Status.FAILED}
    assert "HAMi scheduler metrics" in records["h100-0"].reason
    assert "404" in records["h100-0"].reason
    assert not UsageEntry.objects.exists()
    source = CollectionSource.objects.get(host_cluster=mini)
    assert source.last_status == ScrapeRecord.Status.FAILED
    assert "HAMi" in source.last_message
    # The next good rounds bill from the last good sample on, as after any failed scrape.
    collect(mini, endpoints, 30)
    collect(mini, endpoints, 60)
    assert UsageEntry.objects.filter(pod="q1").aggregate(s=Sum("gpu_us"))["s"] == round(7.5 * MICRO)


# The reader alone (no database).


def test_the_reader_takes_one_family_when_the_scheduler_emits_current_and_legacy_names():
    both = hami.parse(FIXTURE)
    legacy = hami.parse(re.sub(r"(?m)^hami_.*\n", "", FIXTURE))
    assert both.family == "hami_vgpu_memory_allocated_bytes"
    assert legacy.family == "vGPUMemoryAllocated"
    for read in (both, legacy):
        assert read.pods[gpu_uuid("h100-0", 2)] == [
            hami.PodAllocation("tenant-acme", "q1", 20480 * MiB),
            hami.PodAllocation("tenant-beta", "h1", 40960 * MiB),
        ]
        assert read.memory_bytes[gpu_uuid("h100-0", 3)] == 81559 * MiB
        assert not read.bad_lines


def test_the_reader_sums_containers_and_reads_the_v27_family():
    uuid = gpu_uuid("h100-0", 1)
    body = (
        "# TYPE vGPUPodsDeviceAllocated gauge\n"
        + "".join(
            f'vGPUPodsDeviceAllocated{{containeridx="{c}",deviceusedcore="10",deviceuuid="{uuid}",'
            f'nodename="h100-0",podname="two",podnamespace="tenant-x",zone="vGPU"}} 1.073741824e+10\n'
            for c in (0, 1)
        )
        + 'vGPUPodsDeviceAllocated{deviceuuid="GPU-x",podname="p"} 1\n'  # no namespace: listed, skipped
        + 'vGPUPodsDeviceAllocated{podnamespace="a",podname="b",deviceuuid="GPU-y"} lots\n'
    )
    read = hami.parse(body)
    assert read.pods == {uuid: [hami.PodAllocation("tenant-x", "two", 2 * 10240 * MiB)]}
    assert [n for n, _ in read.bad_lines] == [4, 5]
