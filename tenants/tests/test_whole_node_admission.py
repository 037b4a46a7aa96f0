"""Quota admission counts an isolated tenant's guarantee in whole nodes (docs/kubernetes.md, "Dedicated
nodes"): on 8-GPU nodes a guarantee of 3 holds a node, whose other 5 GPUs no other guarantee may count on."""

from __future__ import annotations

import pytest

from core.audit import Actor
from fleet import fleet_file
from fleet.models import GpuClass, HostCluster, Node
from fleet.services import load_fleet
from gpucloud.errors import CapacityExceeded
from placement.dedication import dedicate_nodes
from tenants.capacity import ModelNodes, _take, capacity_of
from tenants.models import DedicatedNode, Tenant
from tenants.services import lifecycle, quotas

pytestmark = pytest.mark.django_db


@pytest.fixture
def pair(gpu_catalog) -> HostCluster:
    """`pair`: two nodes of 8 × H200."""
    group = {"name": "h200", "count": 2, "gpuModel": "h200-141gb", "gpusPerNode": 8}
    group |= {"cpuMilli": 224000, "memoryMiB": 2097152, "topology": {"zone": "zone-a", "rack": "rack-1"}}
    document = {
        "apiVersion": "gpucloud.io/v1alpha1",
        "kind": "Fleet",
        "metadata": {"name": "pair"},
        "spec": {"region": "local", "nodeGroups": [group]},
    }
    return load_fleet(
        actor=Actor.system("test"), fleet=fleet_file.parse(document), source="pair"
    ).host_cluster


@pytest.fixture
def tenant(admin, pair):
    def make(slug: str, tier: str = "standard") -> Tenant:
        return lifecycle.create_tenant(actor=Actor.of(admin), slug=slug, trust_tier=tier, host_cluster=pair)

    return make


def guarantee(admin, tenant: Tenant, units: int) -> None:
    gpu_class = GpuClass.objects.get(name="h200-141gb")
    quotas.set_quota(actor=Actor.of(admin), tenant=tenant, gpu_class=gpu_class, guaranteed=units)


def h200() -> GpuClass:
    return GpuClass.objects.select_related("gpu_model").get(name="h200-141gb")


def test_an_isolated_guarantee_of_three_holds_a_whole_node_that_no_one_else_counts_on(admin, tenant, pair):
    guarantee(admin, tenant("solo", "isolated"), 3)
    shared = tenant("acme")

    with pytest.raises(CapacityExceeded) as refusal:
        guarantee(admin, shared, 9)

    assert refusal.value.extra["available"] == 8, "the other 5 GPUs of the isolated node are not offered"
    assert refusal.value.extra["dedicated_gpus"] == 8
    assert "8 healthy h200-141gb GPUs are on nodes held for isolated tenants" in refusal.value.detail
    guarantee(admin, shared, 8)
    row = capacity_of(h200(), pair)
    assert (row.capacity, row.guaranteed, row.available, row.dedicated_gpus) == (16, 11, 0, 8)


def test_another_isolated_tenant_cannot_take_the_rest_of_a_node_carved_for_the_first(admin, tenant):
    guarantee(admin, tenant("solo", "isolated"), 3)
    rival = tenant("rival", "isolated")

    with pytest.raises(CapacityExceeded) as refusal:
        guarantee(admin, rival, 9)

    assert refusal.value.extra["available"] == 8
    assert "an isolated tenant's guarantee takes whole nodes" in refusal.value.detail
    assert "1 nodes (8 GPUs) are held for no other isolated tenant" in refusal.value.detail
    guarantee(admin, rival, 8)
    with pytest.raises(CapacityExceeded):
        guarantee(admin, tenant("late", "isolated"), 1)


def test_an_isolated_guarantee_may_not_take_a_node_the_shared_pool_needs(admin, tenant):
    guarantee(admin, tenant("acme"), 9)  # more than one node's worth: both nodes hold some of it

    with pytest.raises(CapacityExceeded) as refusal:
        guarantee(admin, tenant("solo", "isolated"), 1)

    assert refusal.value.extra["available"] == 0
    assert "the shared pool's guarantees need 9 of those GPUs" in refusal.value.detail


def test_a_node_still_dedicated_counts_as_held_until_the_pass_returns_it(admin, tenant, pair):
    solo = tenant("solo", "isolated")
    guarantee(admin, solo, 8)
    dedicate_nodes(pair)
    assert DedicatedNode.objects.filter(tenant=solo).count() == 1
    guarantee(admin, solo, 0)

    assert capacity_of(h200(), pair).available == 8, "its node is still dedicated"
    dedicate_nodes(pair)  # nothing of solo's runs there: returned
    assert capacity_of(h200(), pair).available == 16
    assert not DedicatedNode.objects.exists()


def test_the_tenants_own_dedicated_nodes_count_for_its_new_guarantee(admin, tenant, pair):
    solo = tenant("solo", "isolated")
    guarantee(admin, solo, 8)
    dedicate_nodes(pair)
    guarantee(admin, tenant("acme"), 8)  # the other node

    guarantee(admin, solo, 6)  # fits in its own node
    with pytest.raises(CapacityExceeded) as refusal:
        guarantee(admin, solo, 9)
    assert refusal.value.extra["available"] == 8
    assert "it holds 8 healthy h200-141gb GPUs on 1 nodes dedicated to it" in refusal.value.detail


def test_quarantined_nodes_count_for_no_one(admin, tenant, pair):
    Node.objects.filter(host_cluster=pair, name__endswith="-0").update(state=Node.State.QUARANTINED)

    with pytest.raises(CapacityExceeded) as refusal:
        guarantee(admin, tenant("solo", "isolated"), 9)
    assert refusal.value.extra["available"] == 8


def test_becoming_isolated_is_refused_when_the_guarantees_no_longer_fit_in_whole_nodes(admin, tenant):
    vision = tenant("vision")
    guarantee(admin, vision, 3)
    guarantee(admin, tenant("acme"), 10)

    with pytest.raises(CapacityExceeded):
        lifecycle.update_tenant(actor=Actor.of(admin), tenant=vision, trust_tier="isolated")

    vision.refresh_from_db()
    assert vision.trust_tier == "standard"


def test_whole_nodes_are_carved_smallest_covering_first_then_largest():
    assert _take({1: 8, 2: 4, 3: 8}, 3) == [2]
    assert _take({1: 8, 2: 4, 3: 8}, 9) == [1, 2]
    assert _take({1: 8}, 20) == [1], "all there is when it does not cover"
    nodes = ModelNodes(nodes={1: 8, 2: 8, 3: 8}, owners={3: 77}, isolated={77: 10, 78: 3})
    carving = nodes.carve()
    assert carving.held == {77: [3, 1], 78: [2]}
    assert (carving.free, carving.shared_gpus, carving.short) == ({}, 0, {})
