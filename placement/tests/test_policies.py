"""Placement policies: each picks what its definition says, and all share one interface."""

import pytest

from placement.engine.errors import EngineError
from placement.engine.placer import Engine
from placement.engine.policies import POLICIES, make_policy
from placement.tests.factories import make_node, make_pod

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


# 20 unconstrained pods and one that runs only on T4: FGD's 95 % cut keeps only the unconstrained shape, and
# the T4-only pods want a tenth of the T4 capacity below.
MOSTLY_FREE = [make_pod(f"u{i}") for i in range(20)] + [make_pod("t", gpu_models=frozenset({"T4"}))]
# 12 unconstrained pods and 8 T4-only ones: the T4-only pods want 80 % of the T4 capacity.
T4_CONTENDED = [make_pod(f"u{i}") for i in range(12)] + [
    make_pod(f"t{i}", gpu_models=frozenset({"T4"})) for i in range(8)
]


@pytest.mark.parametrize(
    ("workload", "node"), [(T4_CONTENDED, "v100"), (MOSTLY_FREE, "t4")], ids=["contended", "rare"]
)
def test_default_keeps_a_model_for_the_pods_that_need_it_as_far_as_they_contend_for_it(workload, node):
    """Alike but for the model, and t4 already runs a pod: packing there is FGD's choice.

    With T4 wanted by constrained pods, the unconstrained pod leaves the T4 GPU to them; with one rare
    T4-only pod, it packs, as FGD does (weighted in full, the rare shape's access term sent it to v100).
    No consolidating tie-break overrules the term: the policy before this one sent it to t4 in both cases.
    """
    engine = Engine(
        [make_node("t4", gpus=2, model="T4"), make_node("v100", gpus=2, model="V100")],
        "default",
        workload=workload,
    )
    engine.fleet.allocate(make_pod("seed"), 0, (0,))
    assert engine.place(make_pod("p")).node == node
