"""The dedication pass (placement/dedication.py) on the simulated demo fleet: whole nodes kept for each
isolated tenant's guarantees, carved compactly, sticky, and returned only once none of its pods runs there."""

from __future__ import annotations

import pytest

from core.audit import Actor
from core.models import AuditEvent
from fleet.models import GpuClass, Node
from placement.dedication import dedicate_nodes
from placement.service import FleetModel
from tenants.models import DedicatedNode
from tenants.services import lifecycle, quotas

pytestmark = pytest.mark.django_db


def guarantee(admin, tenant, units: int, gpu_class: str = "h200-141gb") -> None:
    cls = GpuClass.objects.get(name=gpu_class)
    quotas.set_quota(actor=Actor.of(admin), tenant=tenant, gpu_class=cls, guaranteed=units)


def nodes_of(slug: str) -> list[str]:
    return sorted(DedicatedNode.objects.filter(tenant__slug=slug).values_list("node__name", flat=True))


def test_it_carves_whole_nodes_compactly_and_persists_them(admin, make_tenant, demo_fleet):
    solo = make_tenant("solo", trust_tier="isolated")
    guarantee(admin, solo, 12)
    guarantee(admin, solo, 8, "a100-80gb")

    outcome = dedicate_nodes(demo_fleet)

    h200 = [n for n in nodes_of("solo") if n.startswith("h200")]
    assert len(h200) == 2
    assert len({n.rsplit("-", 1)[0] for n in h200}) == 1, "both in one rack and NVLink domain"
    assert len([n for n in nodes_of("solo") if n.startswith("a100")]) == 1
    assert sorted(outcome.carved) == sorted((n, "solo") for n in nodes_of("solo"))
    assert AuditEvent.objects.filter(action="node.dedicated", tenant=solo).count() == 3
    model = FleetModel.build(demo_fleet)
    assert sorted(model.engine.fleet.names[i] for i in model.pool("solo")) == nodes_of("solo")


def test_a_second_pass_with_nothing_changed_writes_nothing(admin, make_tenant, demo_fleet):
    guarantee(admin, make_tenant("solo", trust_tier="isolated"), 16)
    first = dedicate_nodes(demo_fleet)

    again = dedicate_nodes(demo_fleet)

    assert again.writes == 0
    assert again.dedicated == first.dedicated


def test_a_lowered_guarantee_returns_only_nodes_none_of_its_pods_runs_on(admin, make_tenant, demo_fleet):
    solo = make_tenant("solo", trust_tier="isolated")
    guarantee(admin, solo, 16)
    dedicate_nodes(demo_fleet)
    busy, idle = nodes_of("solo")
    guarantee(admin, solo, 8)

    outcome = dedicate_nodes(demo_fleet, occupied={idle: {"solo"}})

    assert nodes_of("solo") == [idle], "the node its pod runs on is kept, the other returned"
    assert outcome.returned == [(busy, "solo")]
    guarantee(admin, solo, 0)
    assert dedicate_nodes(demo_fleet, occupied={idle: {"solo"}}).returned == []
    assert dedicate_nodes(demo_fleet, occupied={}).returned == [(idle, "solo")]
    assert AuditEvent.objects.filter(action="node.returned").count() == 2


def test_a_tenant_no_longer_isolated_or_deleted_gives_its_nodes_back_once_empty(
    admin, make_tenant, demo_fleet
):
    solo, rival = make_tenant("solo", trust_tier="isolated"), make_tenant("rival", trust_tier="isolated")
    guarantee(admin, solo, 8)
    guarantee(admin, rival, 8)
    dedicate_nodes(demo_fleet)
    lifecycle.update_tenant(actor=Actor.of(admin), tenant=solo, trust_tier="standard")
    lifecycle.delete_tenant(actor=Actor.of(admin), tenant=rival)
    [mine], [theirs] = nodes_of("solo"), nodes_of("rival")

    kept = dedicate_nodes(demo_fleet, occupied={mine: {"solo"}, theirs: {"rival"}})
    assert kept.returned == []
    model = FleetModel.build(demo_fleet)
    assert not model.engine.fleet.node_healthy[model.engine.fleet.node(mine)], "takes nothing new meanwhile"

    returned = dedicate_nodes(demo_fleet, occupied={})
    assert sorted(returned.returned) == sorted([(mine, "solo"), (theirs, "rival")])
    assert not DedicatedNode.objects.exists()


def test_a_quarantined_node_is_replaced_and_returned_once_empty(admin, make_tenant, demo_fleet):
    solo = make_tenant("solo", trust_tier="isolated")
    guarantee(admin, solo, 8)
    dedicate_nodes(demo_fleet)
    [broken] = nodes_of("solo")
    Node.objects.filter(name=broken).update(state=Node.State.QUARANTINED)

    outcome = dedicate_nodes(demo_fleet)

    [replacement] = nodes_of("solo")
    assert replacement != broken
    assert outcome.carved == [(replacement, "solo")]
    assert outcome.returned == [(broken, "solo")]


def test_nodes_running_another_tenants_pods_are_not_carved_and_a_shortfall_is_reported(
    admin, make_tenant, demo_fleet
):
    solo = make_tenant("solo", trust_tier="isolated")
    guarantee(admin, solo, 24)
    h200 = list(Node.objects.filter(name__startswith="h200").values_list("name", flat=True))
    occupied = {name: {"acme"} for name in h200[:6]}

    outcome = dedicate_nodes(demo_fleet, occupied=occupied)

    assert sorted(nodes_of("solo")) == sorted(h200[6:])
    assert outcome.short == {"solo": {"h200-141gb": 8}}
