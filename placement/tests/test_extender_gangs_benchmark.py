"""The gang benchmark's rules: topology layout, grouping into gangs, Kueue TAS's choice, and the scores."""

from benchmarks.placement.extender_gangs import (
    GangRecord,
    gather,
    group_gangs,
    replay,
    score,
    tas_plan,
    with_topology,
)
from placement.engine.fleet import Fleet, NodeSpec, PodRequest, Topology
from placement.engine.gang import GangRequest


def gpu_pod(name, gpus, models=frozenset()):
    return PodRequest(name, 1000, 1024, gpus, 1000, models)


def test_topology_is_laid_out_in_file_order():
    nodes = with_topology([NodeSpec(f"n{k}", 1000, 1000, 8, "G2") for k in range(20)], 4, 2)
    assert [n.topology.rack for n in nodes[:9]] == ["b0-r0"] * 4 + ["b0-r1"] * 4 + ["b1-r2"]
    assert nodes[19].topology.block == "b2"


def test_multi_gpu_pods_are_grouped_by_shape_in_arrival_order_with_sizes_2_3_4():
    order = [
        gpu_pod("a", 8),
        gpu_pod("single", 1),
        gpu_pod("b", 2),
        gpu_pod("c", 8),
        gpu_pod("d", 2),
        gpu_pod("e", 2),
        gpu_pod("f", 8),
        gpu_pod("g", 8),
        gpu_pod("h", 4, frozenset({"T4"})),
    ]
    gangs = group_gangs(order)
    assert gangs["a"] == gangs["c"] == ("gang-0", 2)  # first gang: size 2, closed when full
    assert gangs["b"] == gangs["d"] == gangs["e"] == ("gang-1", 3)
    assert gangs["f"] == gangs["g"] == ("gang-2", 2)  # gang-2 opened for size 4, left with two at the end
    assert "single" not in gangs
    assert "h" not in gangs


def rack_fleet():
    # rack r1: 2 nodes; rack r2: 3 nodes; rack r3 (other block): 4 nodes; all 8 GPUs.
    layout = [("b1", "r1")] * 2 + [("b1", "r2")] * 3 + [("b2", "r3")] * 4
    return Fleet(
        [
            NodeSpec(f"n{k}", 64_000, 512_000, 8, "H100", Topology("z", b, f"{b}-{r}", ""))
            for k, (b, r) in enumerate(layout)
        ]
    )


def gang(count, level="rack", required=False, gpus=8):
    return GangRequest("g", tuple(gpu_pod(f"p{k}", gpus) for k in range(count)), level, required)


def test_tas_takes_the_tightest_rack_that_fits_whole():
    fleet = rack_fleet()
    plan = tas_plan(fleet, gang(2))
    assert plan is not None
    assert {fleet.names[i] for i, _ in plan} == {"n0", "n1"}
    plan = tas_plan(fleet, gang(3))
    assert plan is not None
    assert {fleet.names[i] for i, _ in plan} == {"n2", "n3", "n4"}


def test_tas_preferred_goes_up_a_level_and_required_does_not():
    fleet = rack_fleet()
    assert tas_plan(fleet, gang(5, required=True)) is None
    plan = tas_plan(fleet, gang(5))
    assert plan is not None
    assert {fleet.specs[i].topology.block for i, _ in plan} == {"b1"}


def test_tas_spreads_over_the_fleet_when_no_domain_holds_the_gang():
    fleet = rack_fleet()
    plan = tas_plan(fleet, gang(9))
    assert plan is not None
    assert len({i for i, _ in plan}) == 9
    assert tas_plan(fleet, gang(10)) is None


def test_tas_packs_small_pods_and_gives_each_its_own_gpus():
    fleet = rack_fleet()
    plan = tas_plan(fleet, gang(4, gpus=2))
    assert plan is not None
    assert {i for i, _ in plan} == {plan[0][0]}
    gpus = [g for _, slot in plan for g in slot]
    assert len(set(gpus)) == 8


def test_score_counts_rack_and_block_and_incomplete_gangs():
    specs = {n.name: n for n in with_topology([NodeSpec(f"n{k}", 1, 1, 8, "G2") for k in range(16)], 2, 2)}
    records = {
        "in-rack": GangRecord(2, ["n0", "n1"], 5.0),
        "in-block": GangRecord(2, ["n0", "n2"], 5.0),
        "spread": GangRecord(2, ["n0", "n9"], 5.0),
        "partial": GangRecord(3, ["n4"], None),
    }
    result = score(records, specs)
    assert result == {
        "gangs": 4,
        "whole": 3,
        "share_in_one_rack": 0.25,
        "share_in_one_block": 0.5,
        "not_completed": 1,
    }


def test_idle_gpu_seconds_count_reserved_slots_until_the_gang_is_whole():
    nodes = with_topology([NodeSpec(f"n{k}", 64_000, 512_000, 8, "G2") for k in range(4)], 2, 2)
    order = [gpu_pod("a", 8), gpu_pod("x", 1), gpu_pod("y", 1), gpu_pod("b", 8)]
    gangs = {"a": ("gang-0", 2), "b": ("gang-0", 2)}
    reserved = replay(nodes, order, gangs, "reserve", "best-fit", 1.0, 300.0)
    alone = replay(nodes, order, gangs, "pod-by-pod", "best-fit", 1.0, 300.0)
    # Reserved: pod a bound (8) and b's slot held (8) over the three ticks before b arrives.
    assert reserved["idle_gpu_seconds"] == 3 * 16
    assert alone["idle_gpu_seconds"] == 3 * 8  # only a's GPUs wait
    assert reserved["share_in_one_rack"] == 1.0
    assert reserved["not_completed"] == 0


def test_together_moves_a_gangs_pods_to_its_first_arrival():
    order = [gpu_pod("a", 8), gpu_pod("x", 1), gpu_pod("b", 2), gpu_pod("c", 8), gpu_pod("y", 1)]
    gangs = {"a": ("gang-0", 2), "c": ("gang-0", 2)}
    assert [p.name for p in gather(order, gangs)] == ["a", "c", "x", "b", "y"]
