"""Carving a dedicated pool for an isolated tenant picks topology-compact nodes."""

import pytest

from placement.engine.errors import EngineError, UnplaceablePod
from placement.engine.fleet import NodeSpec, Tier
from placement.engine.placer import Engine
from placement.tests.factories import make_node, make_pod


def fleet() -> list[NodeSpec]:
    return [
        make_node(f"r{r}-n{n}", zone="z", block="b", rack=f"r{r}", nvlink=f"r{r}-nv{n // 2}")
        for r in range(3)
        for n in range(4)
    ]


def test_it_carves_a_pool_inside_one_nvlink_domain_when_it_can():
    engine = Engine(fleet(), "best-fit")
    names = engine.carve_pool("secretco", 16)
    assert len(names) == 2
    assert len({engine.fleet.specs[engine.fleet.node(n)].topology.nvlink for n in names}) == 1


def test_it_carves_a_pool_inside_one_rack_rather_than_across_racks():
    engine = Engine(fleet(), "best-fit")
    engine.place(make_pod("busy", gpus=1))  # one node of some rack is no longer empty
    names = engine.carve_pool("secretco", 32)
    assert len({n.split("-")[0] for n in names}) == 1


def test_the_pool_then_takes_only_the_tenants_pods():
    engine = Engine(fleet(), "best-fit")
    names = engine.carve_pool("secretco", 8)
    placed = engine.place(make_pod("p", tenant="secretco", tier=Tier.ISOLATED))
    assert placed.node in names


def test_it_refuses_a_pool_larger_than_the_empty_nodes():
    engine = Engine(fleet(), "best-fit")
    with pytest.raises(UnplaceablePod, match="96"):
        engine.carve_pool("secretco", 200)


def test_a_dry_run_names_the_nodes_without_dedicating_them():
    engine = Engine(fleet(), "best-fit")
    names = engine.carve_pool("secretco", 8, dry_run=True)
    assert len(names) == 1
    assert engine.place(make_pod("p", tenant="alice", tier=Tier.STANDARD)) is not None
    assert engine.fleet.node_owner.max() == -1


def test_a_node_running_another_tenants_pod_cannot_be_dedicated():
    engine = Engine(fleet(), "best-fit")
    placed = engine.place(make_pod("p", tenant="alice", tier=Tier.STANDARD))
    with pytest.raises(EngineError, match="other tenants"):
        engine.fleet.dedicate([placed.node], "secretco")
