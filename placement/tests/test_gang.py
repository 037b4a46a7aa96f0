"""Gang placement: all or nothing, topology levels, tightest domain first."""

import pytest

from placement.engine.errors import EngineError, UnplaceablePod
from placement.engine.fleet import NodeSpec
from placement.engine.gang import GangRequest
from placement.engine.placer import Engine
from placement.tests.factories import make_node, make_pod


def rack_fleet() -> list[NodeSpec]:
    """Two racks: r0 has 2 nodes (one NVLink domain each), r1 has 4 nodes in two NVLink domains."""
    nodes = [make_node(f"r0-n{i}", zone="z", block="b", rack="r0", nvlink=f"r0-nv{i}") for i in range(2)]
    nodes += [
        make_node(f"r1-n{i}", zone="z", block="b", rack="r1", nvlink=f"r1-nv{i // 2}") for i in range(4)
    ]
    return nodes


def gang(name: str, pods: int, level: str = "rack", required: bool = True, gpus: int = 8) -> GangRequest:
    return GangRequest(name, tuple(make_pod(f"{name}-{k}", gpus=gpus) for k in range(pods)), level, required)


def test_it_places_a_whole_gang_inside_one_rack():
    engine = Engine(rack_fleet(), "best-fit")
    placed = engine.place_gang(gang("g", 3))
    assert {engine.fleet.specs[p.node_index].topology.rack for p in placed} == {"r1"}


def test_it_picks_the_tightest_rack_and_keeps_the_big_one_free():
    engine = Engine(rack_fleet(), "best-fit")
    placed = engine.place_gang(gang("small", 2))
    assert {p.node for p in placed} == {"r0-n0", "r0-n1"}
    big = engine.place_gang(gang("big", 4))
    assert big is not None
    assert len(big) == 4


def test_it_places_nothing_when_the_gang_does_not_fit():
    engine = Engine(rack_fleet(), "best-fit")
    assert engine.place_gang(gang("huge", 5)) is None
    assert engine.fleet.placements() == {}


def test_a_required_level_is_never_relaxed():
    engine = Engine(rack_fleet(), "best-fit")
    engine.place(make_pod("blocker", gpus=8))  # best-fit takes a node in r0 or r1
    engine.place_gang(gang("fill", 3))
    assert engine.place_gang(gang("g", 2, level="rack", required=True)) is None


def test_a_preferred_level_falls_back_to_a_wider_domain():
    engine = Engine(rack_fleet(), "best-fit")
    engine.place_gang(gang("fill", 3))  # leaves r0: 2 nodes, r1: 1 node
    placed = engine.place_gang(gang("g", 3, level="rack", required=False))
    assert placed is not None
    assert len({p.node for p in placed}) == 3


def test_it_honours_the_nvlink_level():
    engine = Engine(rack_fleet(), "best-fit")
    placed = engine.place_gang(gang("g", 2, level="nvlink", gpus=4))
    assert len({engine.fleet.specs[p.node_index].topology.nvlink for p in placed}) == 1


def test_it_rejects_an_unknown_level():
    with pytest.raises(EngineError, match="topology level"):
        gang("g", 2, level="galaxy")


def test_it_names_a_gang_member_that_can_never_fit():
    engine = Engine(rack_fleet(), "best-fit")
    with pytest.raises(UnplaceablePod, match="g-0"):
        engine.place_gang(gang("g", 1, gpus=16))


def test_what_if_answers_without_changing_the_fleet():
    engine = Engine(rack_fleet(), "best-fit")
    answer = engine.what_if(gangs=[gang("g", 4)], pods=[make_pod("p", gpus=8)])
    assert answer.fits
    assert len(answer.placements) == 5
    assert engine.fleet.placements() == {}
    assert not engine.what_if(gangs=[gang("g", 7)]).fits
