"""The placement engine in the product: the fleet model built from the database honours every tenancy rule."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from core.audit import Actor
from fleet.models import Gpu, GpuClass, Node, Pod
from placement.dedication import dedicate_nodes
from placement.engine import GangRequest
from placement.service import FleetModel, pod_request
from tenants.services import lifecycle, quotas


def cls(name):
    return GpuClass.objects.select_related("gpu_model").get(name=name)


def only_healthy(*uuids):
    """Quarantine every GPU but these, so that pods must meet on them."""
    Gpu.objects.exclude(uuid__in=uuids).update(health=Gpu.Health.QUARANTINED)


def first_gpu(node="h200-r1-0"):
    return Gpu.objects.get(node__name=node, index=0).uuid


def record(model, tenant, gpu_class, placement, started=None):
    """Write a placement as the simulator would, so the next fleet model holds it."""
    holding = model.holding(placement)
    return Pod.objects.create(
        host_cluster=model.host_cluster,
        tenant=tenant,
        namespace=tenant.cluster.namespace,
        name=placement.pod,
        gpu_class=gpu_class,
        node=holding.node,
        gpu_uuids=holding.gpu_uuids,
        gpu_instance_id=holding.gpu_instance_id,
        gpu_milli=holding.gpu_milli,
        mig_layout=holding.mig_layout,
        started_at=started or timezone.now() - timedelta(minutes=1),
    )


@pytest.fixture
def new_tenant(admin, demo_fleet):
    """A tenant on the demo fleet (this directory's conftest has its own `make_tenant`, of plain specs)."""

    def make(slug, trust_tier="standard"):
        return lifecycle.create_tenant(actor=Actor.of(admin), slug=slug, trust_tier=trust_tier)

    return make


@pytest.fixture
def quota(admin):
    def set_quota(tenant, gpu_class, guaranteed, burst=0):
        quotas.set_quota(
            actor=Actor.of(admin), tenant=tenant, gpu_class=cls(gpu_class), guaranteed=guaranteed, burst=burst
        )

    return set_quota


def test_two_trusted_tenants_may_share_one_gpu(new_tenant, demo_fleet):
    a, b = new_tenant("a", trust_tier="trusted"), new_tenant("b", trust_tier="trusted")
    only_healthy(first_gpu())
    model = FleetModel.build(demo_fleet)
    share = cls("h200-141gb.shared")

    first = model.place(pod_request("p1", share, 1, a.slug, a.trust_tier))
    second = model.place(pod_request("p2", share, 1, b.slug, b.trust_tier))

    assert first
    assert second
    assert model.holding(first).gpu_uuids == model.holding(second).gpu_uuids


@pytest.mark.parametrize(
    "tiers", [("standard", "trusted"), ("trusted", "standard"), ("standard", "standard")]
)
def test_a_gpu_is_never_shared_by_two_tenants_unless_both_are_trusted(new_tenant, demo_fleet, tiers):
    a, b = new_tenant("a", trust_tier=tiers[0]), new_tenant("b", trust_tier=tiers[1])
    only_healthy(first_gpu())
    model = FleetModel.build(demo_fleet)
    share = cls("h200-141gb.shared")

    assert model.place(pod_request("p1", share, 1, a.slug, a.trust_tier))
    assert model.place(pod_request("p2", share, 1, b.slug, b.trust_tier)) is None
    assert model.place(pod_request("p3", share, 1, a.slug, a.trust_tier)), "a tenant may share with itself"


def test_the_sharing_rule_holds_for_pods_already_running(new_tenant, demo_fleet):
    a, b = new_tenant("a"), new_tenant("b", trust_tier="trusted")
    only_healthy(first_gpu())
    share = cls("h200-141gb.shared")
    model = FleetModel.build(demo_fleet)
    record(model, a, share, model.place(pod_request("p1", share, 1, a.slug, a.trust_tier)))

    rebuilt = FleetModel.build(demo_fleet)

    assert rebuilt.place(pod_request("p2", share, 1, b.slug, b.trust_tier)) is None


def test_mig_slices_of_one_gpu_go_to_different_standard_tenants(new_tenant, demo_fleet, quota):
    a, b = new_tenant("a"), new_tenant("b")
    quota(a, "h200-141gb.mig-1g.18gb", 4)
    quota(b, "h200-141gb.mig-1g.18gb", 3)
    only_healthy(first_gpu())
    mig = cls("h200-141gb.mig-1g.18gb")
    model = FleetModel.build(demo_fleet)

    mine = model.place(pod_request("p1", mig, 1, a.slug, a.trust_tier))
    theirs = model.place(pod_request("p2", mig, 1, b.slug, b.trust_tier))

    assert mine
    assert theirs
    held = model.holding(mine), model.holding(theirs)
    assert held[0].gpu_uuids == held[1].gpu_uuids == [first_gpu()]
    assert held[0].gpu_instance_id != held[1].gpu_instance_id
    assert held[0].mig_layout == ["1g.18gb"] * 7
    assert held[0].gpu_milli == 143


def test_a_running_mig_pod_keeps_its_instance_when_the_fleet_is_rebuilt(new_tenant, demo_fleet, quota):
    a = new_tenant("a")
    quota(a, "h200-141gb.mig-1g.18gb", 7)
    only_healthy(first_gpu())
    mig = cls("h200-141gb.mig-1g.18gb")
    model = FleetModel.build(demo_fleet)
    row = record(model, a, mig, model.place(pod_request("p1", mig, 1, a.slug, a.trust_tier)))

    rebuilt = FleetModel.build(demo_fleet)
    again = [rebuilt.place(pod_request(f"q{n}", mig, 1, a.slug, a.trust_tier)) for n in range(7)]

    ids = {rebuilt.holding(p).gpu_instance_id for p in again if p}
    assert len(ids) == 6
    assert row.gpu_instance_id not in ids


def test_an_isolated_tenant_gets_whole_gpus_on_nodes_dedicated_to_it(new_tenant, demo_fleet, quota):
    solo, other = new_tenant("solo", trust_tier="isolated"), new_tenant("other", trust_tier="trusted")
    quota(solo, "h200-141gb", 8)
    h200 = cls("h200-141gb")
    carved = dedicate_nodes(demo_fleet).carved  # the dedication pass persists the pool; the model reads it
    model = FleetModel.build(demo_fleet)
    pool = {model.engine.fleet.names[i] for i in model.pool("solo")}

    mine = model.place(pod_request("solo-1", h200, 8, solo.slug, solo.trust_tier))
    others = [model.place(pod_request(f"o{n}", h200, 8, other.slug, other.trust_tier)) for n in range(8)]

    assert len(pool) == 1
    assert carved == [(next(iter(pool)), "solo")]
    assert mine.node in pool
    placed = [p for p in others if p]
    assert len(placed) == 7, "7 other H200 nodes"
    assert not {p.node for p in placed} & pool, "none of the pool"


def test_an_isolated_tenant_without_a_pool_carves_one_node_of_its_model(new_tenant, demo_fleet):
    solo = new_tenant("solo", trust_tier="isolated")
    model = FleetModel.build(demo_fleet)

    placement = model.place(pod_request("solo-1", cls("a100-80gb"), 2, solo.slug, solo.trust_tier))

    assert placement.node.startswith("a100-r3-")
    assert model.pool("solo") == [model.engine.fleet.index[placement.node]]


def test_quarantined_nodes_and_gpus_are_never_used(new_tenant, demo_fleet):
    a = new_tenant("a", trust_tier="trusted")
    Node.objects.filter(name="h200-r1-0").update(state=Node.State.QUARANTINED)
    Gpu.objects.filter(node__name="h200-r1-1", index__in=[0, 5]).update(health=Gpu.Health.QUARANTINED)
    sick = set(Gpu.objects.filter(node__name="h200-r1-0").values_list("uuid", flat=True))
    sick |= set(Gpu.objects.filter(health=Gpu.Health.QUARANTINED).values_list("uuid", flat=True))
    model = FleetModel.build(demo_fleet)
    h200 = cls("h200-141gb")

    placed = [model.place(pod_request(f"p{n}", h200, 1, a.slug, a.trust_tier)) for n in range(70)]

    used = [uuid for p in placed if p for uuid in model.holding(p).gpu_uuids]
    assert len(used) == 64 - 8 - 2
    assert not set(used) & sick


def test_a_gang_is_placed_whole_inside_one_domain_or_not_at_all(new_tenant, demo_fleet):
    a = new_tenant("a")
    model = FleetModel.build(demo_fleet)
    h200 = cls("h200-141gb")
    pods = lambda n: tuple(pod_request(f"g{n}-{k}", h200, 8, a.slug, a.trust_tier) for k in range(n))  # noqa: E731

    assert model.place_gang(GangRequest("too-big", pods(5), "nvlink", required=True)) is None
    assert model.engine.fleet.placements() == {}, "nothing of a refused gang is held"
    placed = model.place_gang(GangRequest("fits", pods(4), "nvlink", required=True)) or []
    assert len(placed) == 4
    assert len({p.node.rsplit("-", 1)[0] for p in placed}) == 1


def test_finished_pods_hold_nothing(new_tenant, demo_fleet):
    a = new_tenant("a")
    only_healthy(first_gpu())
    h200 = cls("h200-141gb")
    model = FleetModel.build(demo_fleet)
    row = record(model, a, h200, model.place(pod_request("p1", h200, 1, a.slug, a.trust_tier)))

    assert FleetModel.build(demo_fleet).place(pod_request("p2", h200, 1, a.slug, a.trust_tier)) is None
    Pod.objects.filter(pk=row.pk).update(finished_at=timezone.now())
    assert FleetModel.build(demo_fleet).place(pod_request("p2", h200, 1, a.slug, a.trust_tier))


def test_hami_fractions_take_their_declared_share_of_a_gpu(new_tenant, demo_fleet):
    a = new_tenant("a", trust_tier="trusted")
    only_healthy(first_gpu())
    model = FleetModel.build(demo_fleet)
    half, quarter = cls("h200-141gb.hami-50"), cls("h200-141gb.hami-25")

    placed = [
        model.place(pod_request(f"p{i}", c, 1, a.slug, a.trust_tier))
        for i, c in enumerate([half, quarter, quarter])
    ]

    assert all(placed)
    assert [model.holding(p).gpu_milli for p in placed if p] == [500, 250, 250]
    assert model.place(pod_request("p3", quarter, 1, a.slug, a.trust_tier)) is None  # the GPU is full
