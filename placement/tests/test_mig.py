"""MIG geometry per model and the MIG planner."""

import pytest

from placement.engine.errors import EngineError, UnknownGpuModel, UnknownMigProfile
from placement.engine.mig import MODELS, MigGpu, is_valid, layouts, lower_bound, placement, plan_mig

SIZES = {"a100-80gb": "10gb", "h100-80gb": "10gb", "h200-141gb": "18gb", "b200-180gb": "23gb"}


@pytest.mark.parametrize("model", MODELS)
def test_every_layout_of_every_model_respects_the_slice_rules(model):
    for layout in layouts(model):
        starts = placement(model, layout)
        used = [0] * 8
        for name, start in starts:
            prof = MODELS[model][name]
            assert start in prof.starts
            for s in range(start, start + prof.memory):
                used[s] += 1
        assert max(used) == 1
        assert sum(MODELS[model][n].compute for n in layout) <= 7


@pytest.mark.parametrize("model", MODELS)
def test_seven_small_slices_fit_but_eight_do_not(model):
    one = f"1g.{SIZES[model]}"
    assert is_valid(model, [one] * 7)
    assert not is_valid(model, [one] * 8)


@pytest.mark.parametrize(
    ("layout", "valid"),
    [
        (["3g.40gb", "3g.40gb"], True),
        (["4g.40gb", "2g.20gb", "1g.10gb"], True),
        (["2g.20gb", "2g.20gb", "2g.20gb", "1g.10gb"], True),
        (["1g.10gb"] * 4 + ["3g.40gb"], True),
        (["3g.40gb", "3g.40gb", "1g.10gb"], False),  # 3g at 0 and 4 leave no memory slice
        (["4g.40gb", "3g.40gb"], False),  # not among NVIDIA's supported combinations
        (["2g.20gb"] * 4, False),  # 2g may start only at 0, 2, 4
        (["7g.80gb", "1g.10gb"], False),
        (["1g.20gb"] * 4, True),
        (["1g.10gb+me", "1g.10gb+me"], False),
    ],
)
def test_h100_layouts_follow_nvidias_placement_rules(layout, valid):
    assert is_valid("h100-80gb", layout) is valid


def test_it_names_a_profile_the_model_lacks():
    with pytest.raises(UnknownMigProfile, match=r"h200-141gb has no MIG profile '1g.10gb'"):
        plan_mig({"h200-141gb.mig-1g.10gb": 1}, [])


def test_it_names_an_unknown_model():
    with pytest.raises(UnknownGpuModel, match="t4"):
        plan_mig({"t4.mig-1g.5gb": 1}, [])


def test_it_plans_the_issue_example_on_the_fewest_gpus():
    demand = {"h200-141gb.mig-1g.18gb": 21, "h200-141gb.mig-3g.71gb": 4}
    plan = plan_mig(demand, [MigGpu(f"g{i}", "h200-141gb") for i in range(8)])
    assert plan.unsatisfied == {}
    assert plan.gpus_used == lower_bound(demand) == 5
    assert all(is_valid("h200-141gb", lay) for lay in plan.layouts.values() if lay)


def test_it_keeps_the_layout_of_gpus_with_running_work():
    busy = MigGpu("busy", "h100-80gb", ("3g.40gb", "3g.40gb"), ("3g.40gb",))
    idle = [MigGpu(f"i{k}", "h100-80gb") for k in range(3)]
    plan = plan_mig({"h100-80gb.mig-3g.40gb": 2, "h100-80gb.mig-1g.10gb": 7}, [busy, *idle])
    assert plan.layouts["busy"] == ("3g.40gb", "3g.40gb")
    assert plan.reconfigured_busy == []
    assert plan.gpus_used == 2


def test_it_reuses_an_idle_gpus_current_layout_instead_of_reconfiguring():
    gpus = [MigGpu("a", "h100-80gb"), MigGpu("b", "h100-80gb", ("1g.10gb",) * 7)]
    plan = plan_mig({"h100-80gb.mig-1g.10gb": 7}, gpus)
    assert plan.reconfigured == []
    assert plan.layouts["b"] == ("1g.10gb",) * 7


def test_it_grows_a_busy_gpu_only_when_nothing_else_is_left():
    busy = MigGpu("busy", "h100-80gb", ("3g.40gb",), ("3g.40gb",))
    plan = plan_mig({"h100-80gb.mig-3g.40gb": 1, "h100-80gb.mig-1g.10gb": 3}, [busy])
    assert plan.reconfigured_busy == ["busy"]
    assert "3g.40gb" in plan.layouts["busy"]
    assert plan.layouts["busy"].count("1g.10gb") >= 3
    assert plan.unsatisfied == {}


def test_it_reports_what_cannot_be_satisfied():
    plan = plan_mig({"a100-80gb.mig-7g.80gb": 3}, [MigGpu("a", "a100-80gb"), MigGpu("b", "a100-80gb")])
    assert plan.unsatisfied == {"a100-80gb.mig-7g.80gb": 1}


def test_it_rejects_a_current_layout_that_is_not_valid():
    with pytest.raises(EngineError, match="not valid"):
        plan_mig({}, [MigGpu("a", "h100-80gb", ("7g.80gb", "1g.10gb"))])


def test_it_matches_the_integer_programming_optimum_where_plain_greedy_does_not():
    # From the MIG benchmark (seed 50): greedy-by-layout needs 38 GPUs, the exact optimum (HiGHS) is 37.
    counts = {"1g.10gb": 23, "1g.20gb": 28, "2g.20gb": 40, "3g.40gb": 27, "4g.40gb": 6}
    demand = {f"h100-80gb.mig-{name}": n for name, n in counts.items()}
    plan = plan_mig(demand, [MigGpu(f"g{k}", "h100-80gb") for k in range(60)])
    assert plan.unsatisfied == {}
    assert plan.gpus_used == 37
