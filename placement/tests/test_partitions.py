"""The node-level partition planner (placement/engine/partition_plans.py), without a cluster."""

from __future__ import annotations

import random

from placement.engine.mig import is_valid
from placement.engine.partition_plans import PartitionNode, plan_partitions

WHOLE8 = tuple(() for _ in range(8))
SLICED = (("1g.18gb",) * 7, *tuple(() for _ in range(7)))


def node(name: str, **kwargs: object) -> PartitionNode:
    values: dict[str, object] = {"model": "h200-141gb", "gpus": 8, "mig_capable": True, "layouts": WHOLE8}
    values.update(kwargs)
    return PartitionNode(name=name, **values)  # type: ignore[arg-type]


def test_slices_go_to_an_idle_node_and_a_busy_one_keeps_its_gpus():
    plan = plan_partitions(
        [node("a", busy=True), node("b")], {"h200-141gb.mig-1g.18gb": 7}, {}, max_changes=2
    )
    assert plan.apply_now == ["b"]
    assert plan.targets["a"].layouts == WHOLE8
    assert plan.targets["b"].layouts == SLICED


def test_slices_nobody_guarantees_any_more_go_back_to_whole_gpus_on_idle_nodes_only():
    plan = plan_partitions(
        [node("a", layouts=SLICED), node("b", layouts=SLICED, busy=True)], {}, {}, max_changes=2
    )
    assert plan.targets["a"].layouts == WHOLE8
    assert plan.apply_now == ["a"]
    assert plan.targets["b"].layouts == SLICED


def test_a_failed_node_in_backoff_waits_and_one_due_for_retry_is_changed_again():
    held = node("a", layouts=SLICED, held="retrying at 12:00")
    due = node("b", layouts=SLICED, retry=True)
    plan = plan_partitions([held, due], {"h200-141gb.mig-1g.18gb": 14}, {}, max_changes=2)
    assert plan.waiting == {"a": "retrying at 12:00"}
    assert plan.apply_now == ["b"]


def test_time_slicing_takes_whole_idle_nodes_and_keeps_busy_ones():
    plan = plan_partitions(
        [node("a", sharing=True, busy=True), node("b"), node("c", layouts=SLICED)],
        {"h200-141gb.mig-1g.18gb": 7},
        {"h200-141gb": 12},
        max_changes=3,
    )
    assert plan.targets["a"].sharing
    assert plan.targets["b"].sharing
    assert not plan.targets["c"].sharing
    assert plan.apply_now == ["b"]
    assert plan.shared_short == {}


def test_a_quarantined_gpu_gets_no_slices_and_its_slices_supply_nothing():
    # Idle node: GPU 0 (quarantined) goes to MIG disabled, its slices move to a GPU in service.
    plan = plan_partitions(
        [node("a", layouts=SLICED, unavailable=frozenset({0}))],
        {"h200-141gb.mig-1g.18gb": 7},
        {},
        max_changes=2,
    )
    assert plan.targets["a"].layouts == ((), ("1g.18gb",) * 7, *WHOLE8[2:])
    assert plan.apply_now == ["a"]
    # Every GPU out: nothing planned there, the demand is unsatisfied.
    plan = plan_partitions(
        [node("a", unavailable=frozenset(range(8)))], {"h200-141gb.mig-1g.18gb": 7}, {}, max_changes=2
    )
    assert plan.targets["a"].layouts == WHOLE8
    assert plan.unsatisfied == {"h200-141gb.mig-1g.18gb": 7}
    # Busy node: the layout stays until the node is idle, but the demand is laid out elsewhere.
    busy = node("a", layouts=SLICED, busy=True, unavailable=frozenset({0}))
    plan = plan_partitions([busy, node("b")], {"h200-141gb.mig-1g.18gb": 7}, {}, max_changes=2)
    assert plan.targets["a"].layouts == SLICED
    assert plan.targets["b"].layouts == SLICED
    assert plan.apply_now == ["b"]


def test_time_slicing_counts_gpus_in_service_only():
    out = node("a", unavailable=frozenset(range(8)))
    plan = plan_partitions([out, node("b", unavailable=frozenset({7}))], {}, {"h200-141gb": 8}, max_changes=2)
    assert not plan.targets["a"].sharing
    assert plan.targets["b"].sharing
    assert plan.shared_short == {"h200-141gb": 1}


def test_no_plan_ever_changes_a_busy_node_or_exceeds_the_budget():
    rng = random.Random(15)
    profiles = ["1g.18gb", "2g.35gb", "3g.71gb", "7g.141gb"]
    for _ in range(300):
        nodes = []
        for i in range(rng.randint(1, 6)):
            layout = tuple(rng.choice([(), ("3g.71gb", "3g.71gb"), ("1g.18gb",) * 7]) for _ in range(8))
            nodes.append(node(f"n{i}", layouts=layout, busy=rng.random() < 0.4, in_flight=rng.random() < 0.1))
        demand = {f"h200-141gb.mig-{p}": rng.randint(0, 20) for p in profiles}
        budget = rng.randint(1, 3)
        plan = plan_partitions(nodes, demand, {"h200-141gb": rng.randint(0, 16)}, max_changes=budget)
        busy = {n.name for n in nodes if n.busy or n.in_flight}
        assert not busy & set(plan.apply_now)
        for n in nodes:
            if n.name in busy:
                assert plan.targets[n.name].layouts == n.layouts
            assert all(not lay or is_valid("h200-141gb", lay) for lay in plan.targets[n.name].layouts)
        assert len(plan.apply_now) <= max(0, budget - sum(1 for n in nodes if n.in_flight))
        assert set(plan.drain) <= {n.name for n in nodes if n.busy}


def test_when_idle_gpus_cannot_hold_the_slices_the_busy_node_with_fewest_pods_is_cordoned_for_mig():
    nodes = [node("a", busy=True, pods=3), node("b", busy=True, pods=1), node("c", busy=True, pods=1)]
    plan = plan_partitions(nodes, {"h200-141gb.mig-1g.18gb": 14}, {}, max_changes=2)
    assert plan.apply_now == []
    assert plan.drain == ["b"]
    assert plan.unsatisfied == {"h200-141gb.mig-1g.18gb": 14}
    assert plan.waiting["b"].startswith("cordoned for MIG")
    # Once cordoned, a node stays the one drained even if another now runs fewer pods.
    nodes = [node("a", busy=True, pods=3, cordoned=True), node("b", busy=True, pods=1)]
    plan = plan_partitions(nodes, {"h200-141gb.mig-1g.18gb": 14}, {}, max_changes=2)
    assert plan.drain == ["a"]


def test_the_churn_benchmark_never_reconfigures_a_busy_gpu_incrementally(monkeypatch):
    from benchmarks.placement import churn

    monkeypatch.setattr(churn, "NODES", 12)
    monkeypatch.setattr(churn, "STEPS", 8)
    monkeypatch.setattr(churn, "TENANTS", 6)
    figures = churn.measure([7])
    assert figures["incremental"]["busy_gpus_reconfigured"] == 0
    assert figures["from scratch"]["busy_gpus_reconfigured"] > 0
    assert figures["incremental"]["gpus_reconfigured"] > 0
