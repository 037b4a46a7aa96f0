"""Placement policies: each picks what its definition says, and all share one interface."""

import pytest

from scheduling.engine.errors import EngineError
from scheduling.engine.placer import Engine
from scheduling.engine.policies import POLICIES, make_policy
from scheduling.tests.factories import make_node, make_pod

WORKLOAD = [make_pod(f"w{i}", milli=500) for i in range(6)] + [make_pod(f"x{i}") for i in range(4)]


def half_used_fleet(policy: str) -> Engine:
    """n0 has one GPU half used; n1 is empty."""
    engine = Engine([make_node("n0", gpus=2), make_node("n1", gpus=2)], policy, workload=WORKLOAD)
    engine.fleet.allocate(make_pod("seed", milli=500), 0, (0,))
    return engine


@pytest.mark.parametrize("policy", ["best-fit", "fgd", "default"])
def test_a_half_gpu_pod_fills_the_half_used_gpu(policy):
    placed = half_used_fleet(policy).place(make_pod("p", milli=500))
    assert (placed.node, placed.gpus) == ("n0", (0,))


@pytest.mark.parametrize("policy", ["fgd", "default"])
def test_a_whole_gpu_pod_keeps_the_half_used_gpu_for_shares(policy):
    placed = half_used_fleet(policy).place(make_pod("p"))
    assert placed.gpus != (0,) or placed.node != "n0"


def test_best_fit_prefers_the_fullest_node():
    engine = Engine([make_node("big", gpus=8), make_node("small", gpus=2)], "best-fit")
    assert engine.place(make_pod("p")).node == "small"


def test_default_prefers_a_busy_node_to_an_empty_one_among_equals():
    engine = Engine([make_node("empty", gpus=8), make_node("busy", gpus=8)], "default", workload=WORKLOAD)
    engine.fleet.allocate(make_pod("seed"), 1, (0,))
    assert engine.place(make_pod("p")).node == "busy"
    assert (
        Engine([make_node("empty", gpus=8), make_node("busy", gpus=8)], "fgd", workload=WORKLOAD)
        .place(make_pod("p"))
        .node
        == "empty"
    )  # FGD: first in order


GPU_PODS = [make_pod(f"g{i}", cpu=12_000) for i in range(10)]


@pytest.mark.parametrize(("policy", "node"), [("default", "cpu-rich"), ("fgd", "gpu-dense")])
def test_default_puts_a_cpu_only_pod_where_its_cores_strand_no_gpus(policy, node):
    """40 cores on gpu-dense leave room for 4 of its 8 GPUs' pods; FGD sees no harm (one pod still fits)."""
    nodes = [make_node("gpu-dense", gpus=8, cpu=96_000), make_node("cpu-rich", gpus=8, cpu=200_000)]
    engine = Engine(nodes, policy, workload=GPU_PODS)
    assert engine.place(make_pod("batch", gpus=0, cpu=40_000)).node == node


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_every_policy_places_only_where_the_pod_fits(policy):
    engine = Engine(
        [make_node("tiny", gpus=1, cpu=2000), make_node("roomy", gpus=4)], policy, workload=WORKLOAD
    )
    for k in range(4):
        assert engine.place(make_pod(f"p{k}", cpu=4000)).node == "roomy"
    assert engine.place(make_pod("p5", cpu=4000)) is None


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_every_policy_frees_resources_on_release(policy):
    engine = Engine([make_node("n0", gpus=1)], policy, workload=WORKLOAD)
    engine.place(make_pod("a"))
    engine.release("a")
    assert engine.place(make_pod("b")) is not None


def test_it_names_the_known_policies_for_an_unknown_one():
    with pytest.raises(EngineError, match="best-fit"):
        make_policy("magic")


@pytest.mark.parametrize(("policy", "node"), [("default", "roomy"), ("fgd", "tight")])
def test_default_breaks_ties_for_a_gpu_pod_where_its_cores_strand_no_gpus(policy, node):
    """Both run a pod and look alike to FGD; on tight a 24-core newcomer leaves cores for 3 of 6 GPUs."""
    engine = Engine(
        [make_node("tight", gpus=8, cpu=72_000), make_node("roomy", gpus=8, cpu=212_000)],
        policy,
        workload=GPU_PODS,
    )
    for i in (0, 1):
        engine.fleet.allocate(make_pod(f"seed{i}", cpu=12_000), i, (0,))
    assert engine.place(make_pod("p", cpu=24_000)).node == node
