"""Feasibility and estimated starts on a small fleet (one node of 8 × H200): answers known by hand."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from core.audit import Actor
from fleet.models import Gpu, GpuClass, Node, Pod
from gpucloud.errors import ValidationFailed
from placement import queue_estimate as qe
from placement.service import FleetModel, pod_request
from tenants.services import lifecycle, quotas

H200 = "h200-141gb"


def cls(name):
    return GpuClass.objects.select_related("gpu_model").get(name=name)


@pytest.fixture
def tenant(admin, small_fleet):
    t = lifecycle.create_tenant(actor=Actor.of(admin), slug="solo", host_cluster=small_fleet)
    quotas.set_quota(actor=Actor.of(admin), tenant=t, gpu_class=cls(H200), guaranteed=8, burst=0)
    return t


def run_pod(tenant, gpus, *, started, ends=None, finished=None, name="p"):
    """A pod holding `gpus` GPUs of the small fleet's node, as the simulator records one."""
    model = FleetModel.build(tenant.cluster.host_cluster)
    placement = model.place(pod_request(name, cls(H200), gpus, tenant.slug, tenant.trust_tier))
    assert placement is not None
    holding = model.holding(placement)
    return Pod.objects.create(
        host_cluster=model.host_cluster,
        tenant=tenant,
        namespace=tenant.cluster.namespace,
        name=name,
        gpu_class=cls(H200),
        node=holding.node,
        gpu_uuids=holding.gpu_uuids,
        started_at=started,
        ends_at=ends,
        finished_at=finished,
    )


def test_an_empty_node_fits_now_on_it(tenant):
    answer = qe.feasibility(tenant, H200, 4, 2)

    assert answer.fits_now
    assert answer.reason == "fits now"
    assert answer.nodes == [Node.objects.get(host_cluster=tenant.cluster.host_cluster).name]
    assert (answer.quota.from_guarantee, answer.quota.borrowed) == (4, 0)


def test_a_full_node_is_free_when_its_pod_ends(tenant):
    now = timezone.now()
    run_pod(tenant, 8, started=now - timedelta(minutes=10), ends=now + timedelta(minutes=30))

    answer = qe.feasibility(tenant, H200, 4, 1, at=now)

    assert not answer.fits_now
    assert answer.estimated_start == now + timedelta(minutes=30)
    assert answer.reason.startswith("waiting for the tenant's own pods to end")  # 8 in use + 4 > 8
    assert answer.quota.in_use == 8


def test_the_queue_ahead_goes_first(tenant, admin):
    quotas.set_quota(actor=Actor.of(admin), tenant=tenant, gpu_class=cls(H200), guaranteed=8, burst=0)
    now = timezone.now()
    run_pod(tenant, 4, started=now - timedelta(minutes=10), ends=now + timedelta(minutes=30))
    # A finished pod gives the class its median runtime: 60 minutes.
    Pod.objects.filter(name="p").update(finished_at=None)
    run_pod(tenant, 1, started=now - timedelta(minutes=90), finished=now - timedelta(minutes=30), name="old")
    Pod.objects.filter(name="old").update(finished_at=now - timedelta(minutes=30))

    # 4 free now; the 4 waiting ahead take them for an hour; ours (4) waits for the 4 freed at +30 min.
    answer = qe.feasibility(tenant, H200, 4, 1, ahead=[(cls(H200), 4, "first")], at=now)

    assert answer.estimated_start == now + timedelta(minutes=30)


def test_over_quota_never_starts(tenant):
    answer = qe.feasibility(tenant, H200, 12, 1)

    assert answer.estimated_start is None
    assert not answer.fits_now
    assert answer.reason == f"quota exceeded: asks 12 × {H200}, guarantee + burst is 8"


def test_no_healthy_gpu_of_the_class_never_starts(tenant, admin):
    quotas.set_quota(actor=Actor.of(admin), tenant=tenant, gpu_class=cls(H200), guaranteed=8, burst=0)
    Gpu.objects.filter(node__host_cluster=tenant.cluster.host_cluster).update(health=Gpu.Health.QUARANTINED)

    answer = qe.feasibility(tenant, H200, 2, 1)

    assert answer.estimated_start is None
    assert answer.reason == f"the host cluster small has no healthy GPU of class {H200}"


@pytest.mark.parametrize(
    ("gpu_class", "count", "hours", "field"),
    [("nope", 1, 1, "gpu_class"), (H200, 0, 1, "count"), (H200, 1, 0, "hours"), (H200, 1, 10_000, "hours")],
)
def test_bad_asks_are_refused_by_name(tenant, gpu_class, count, hours, field):
    with pytest.raises(ValidationFailed) as caught:
        qe.feasibility(tenant, gpu_class, count, hours)

    assert field in caught.value.errors


def test_replay_releases_in_time_order_and_places_in_queue_order(tenant):
    now = timezone.now()
    run_pod(tenant, 6, started=now, ends=now + timedelta(minutes=20), name="a")
    model = FleetModel.build(tenant.cluster.host_cluster, now)
    h200 = cls(H200)
    big = qe.Queued("big", qe.requests_for("big", h200, 8, tenant, 8), timedelta(minutes=10), "q", 8)
    small = qe.Queued("small", qe.requests_for("small", h200, 2, tenant, 8), timedelta(minutes=5), "q", 2)
    ends = [(at, name, "q", units) for at, name, _, units in qe.expected_ends(model, now, {})]

    starts = qe.replay(model, ends, [big, small], now)
    limited = qe.replay(model, ends, [big, small], now, held={"q": 6}, limits={"q": 7})

    # 2 free now: "small" jumps ahead (BestEffortFIFO) and ends at +5; "big" waits for the 6 held to +20.
    assert starts["small"].at == now
    assert starts["big"].at == now + timedelta(minutes=20)
    # A quota of 7 with 6 held: "small" (2) waits for the 6 to end too, and "big" (8) never fits it.
    assert limited["small"].at == now + timedelta(minutes=20)
    assert limited["big"].at is None
