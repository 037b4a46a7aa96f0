"""Rule 3b through the cluster's rows (`billing.lifecycle.pod_facts`) and ingest: a pod that lived wholly
between two scrapes is billed its lifetime on a MIG instance idle at both, and its declared fraction of a
shared or HAMi GPU beside the holders DCGM saw, under its own class, once."""

from __future__ import annotations

from typing import Any

import pytest
from django.db.models import Sum

from billing.lifecycle import pod_facts
from billing.models import MICRO, UsageEntry
from billing.services.ingest import ingest_rounds
from billing.tests.conftest import A100, Row, at, exposition, gpu_uuid

MIG_GPU = gpu_uuid("a100-0", 0)


def scrape() -> dict[str, str]:
    """What DCGM shows at both scrapes: `infer` on MIG instance 1, instance 2 idle; `serve` on half of the
    time-sliced GPU 3 and `h1` on half of the HAMi GPU 2; never the pods that came and went between."""
    h100 = [
        Row(gpu_uuid("h100-0", 2), pod="tenant-acme/h1", index=2),
        Row(gpu_uuid("h100-0", 3), pod="tenant-acme/serve", index=3),
    ]
    a100 = [
        Row(MIG_GPU, model=A100, pod="tenant-acme/infer", profile="3g.40gb", gi="1"),
        Row(MIG_GPU, model=A100, profile="3g.40gb", gi="2"),
    ]
    return {"h100-0": exposition("h100-0", h100), "a100-0": exposition("a100-0", a100)}


@pytest.fixture
def pods(mini, tenant_on, make_pod) -> None:
    acme = tenant_on("acme")
    before, after = at(-600), at(600)
    make_pod("infer", "tenant-acme", "a100-80gb.mig-3g.40gb", "a100-0", [0], before, after, gi=1, tenant=acme)
    make_pod("serve", "tenant-acme", "h100-80gb.shared", "h100-0", [3], before, after, milli=500, tenant=acme)
    make_pod("h1", "tenant-acme", "h100-80gb.hami-50", "h100-0", [2], before, after, milli=500, tenant=acme)
    # Between the scrapes at 30 s and 60 s:
    make_pod("tiny", "tenant-acme", "a100-80gb.mig-3g.40gb", "a100-0", [0], at(35), at(45), gi=2, tenant=acme)
    make_pod(
        "burst", "tenant-acme", "h100-80gb.shared", "h100-0", [3], at(35), at(45), milli=250, tenant=acme
    )
    make_pod("q1", "tenant-acme", "h100-80gb.hami-25", "h100-0", [2], at(40), at(52), milli=250, tenant=acme)


def ingest(mini) -> None:
    ingest_rounds(mini, [(at(t), scrape()) for t in (30, 60)], facts=pod_facts(mini, at(60), 60))


def billed(**filters: Any) -> dict[tuple[str, str, str], float]:
    rows = UsageEntry.objects.filter(**filters).values_list("pod", "gpu_class", "device")
    return {
        (pod, gpu_class, device): s / MICRO for pod, gpu_class, device, s in rows.annotate(s=Sum("gpu_us"))
    }


def test_unseen_pods_are_billed_on_mig_instances_and_beside_holders_of_shared_gpus(mini, pods):
    ingest(mini)
    usage = billed(namespace="tenant-acme")
    assert usage[("tiny", "a100-80gb.mig-3g.40gb", f"{MIG_GPU}/2")] == 10.0
    assert usage[("infer", "a100-80gb.mig-3g.40gb", f"{MIG_GPU}/1")] == 30.0
    shared, hami = gpu_uuid("h100-0", 3), gpu_uuid("h100-0", 2)
    assert usage[("burst", "h100-80gb.shared", shared)] == 2.5  # 10 s x 1/4
    assert usage[("serve", "h100-80gb.shared", shared)] == 15.0  # its 1/2 of 30 s, as without burst
    assert usage[("q1", "h100-80gb.hami-25", hami)] == 3.0  # 12 s x 1/4
    assert usage[("h1", "h100-80gb.hami-50", hami)] == 15.0
    for device in (shared, hami, f"{MIG_GPU}/2"):  # never more than the device's own 30 s
        assert sum(v for (_, _, d), v in billed().items() if d == device) == 30.0


def test_a_replayed_round_bills_the_unseen_pods_once(mini, pods):
    ingest(mini)
    first = billed()
    ingest(mini)
    assert billed() == first


def test_an_unseen_share_that_would_not_fit_is_not_billed(mini, pods, make_pod, tenant_on):
    """Beside `serve`'s half, `burst` (a quarter) and a second half overlapping it pass the whole GPU: the
    cluster's word cannot be right as it stands, so neither is billed and `serve` keeps its half."""
    make_pod("wide", "tenant-acme", "h100-80gb.shared", "h100-0", [3], at(40), at(50), milli=500)
    ingest(mini)
    usage = billed(device=gpu_uuid("h100-0", 3))
    assert ("burst", "h100-80gb.shared", gpu_uuid("h100-0", 3)) not in usage
    assert ("wide", "h100-80gb.shared", gpu_uuid("h100-0", 3)) not in usage
    assert usage[("serve", "h100-80gb.shared", gpu_uuid("h100-0", 3))] == 15.0
