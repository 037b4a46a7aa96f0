"""`python -m benchmarks.estimate`: its scoring on estimates whose errors are known by hand, and the
``--in-memory`` replay on a trace whose answer is known by hand: a later, smaller pod fills a gap ahead of a
waiting one, and the waiting pod's estimate is wrong by exactly that."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime, timedelta

from benchmarks.estimate import in_memory, late_causes, score

NODES = "sn,cpu_milli,memory_mib,gpu,model\nn0,96000,393216,2,V100M16\n"
HEADER = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time"
PODS = f"""{HEADER},scheduled_time
a,1000,1024,1,1000,,LS,Running,0,100,0
x,1000,1024,1,1000,,LS,Running,0,50,0
b,1000,1024,2,1000,,LS,Running,10,20,10
c,1000,1024,1,1000,,LS,Running,20,1020,20
"""


def test_a_pod_that_jumps_ahead_is_the_error(tmp_path, capsys):
    (tmp_path / "nodes.csv").write_text(NODES)
    (tmp_path / "pods.csv").write_text(PODS)
    args = argparse.Namespace(
        nodes=tmp_path / "nodes.csv", pods=tmp_path / "pods.csv", fleet_nodes=1, stretch=1.0, start=None
    )

    summary = in_memory(args)

    # b (2 GPUs) arrives at 10 behind a (to 100) and x (to 50): estimated 100. c (1 GPU, 1000 s) arrives
    # at 20, estimated 50 (x's GPU; b does not fit one) and starts then; b waits for c: 1050, 950 s late.
    assert (summary["pods"], summary["started_on_arrival"], summary["estimates"]) == (4, 2, 2)
    assert summary["median_error_min"] == round(950 / 60 / 2, 1)  # errors 0 and 15.8 min
    assert summary["p90_error_min"] == round(950 / 60, 1)  # nearest rank: the higher of two


T0 = datetime(2026, 1, 1, tzinfo=UTC)


def minutes(n: float) -> datetime:
    return T0 + timedelta(minutes=n)


def test_the_score_is_the_first_estimates_error_beside_the_anchor_now():
    first = {
        (1, "exact"): (minutes(0), minutes(10)),
        (1, "late"): (minutes(0), minutes(5)),  # started at 35: 30 min late
        (2, "early"): (minutes(2), minutes(50)),  # started at 40: 10 min early
        (2, "lost"): (minutes(3), None),  # started at 60 with no estimate
        (2, "stuck"): (minutes(3), None),  # never started
        (1, "left"): (minutes(4), minutes(9)),  # never started
    }
    started = {
        (1, "exact"): minutes(10),
        (1, "late"): minutes(35),
        (2, "early"): minutes(40),
        (2, "lost"): minutes(60),
    }

    result = score(first, started)

    assert (result["waited"], result["scored"], result["exact"], result["late"], result["early"]) == (
        6,
        3,
        1,
        1,
        1,
    )
    assert result["median_error_min"] == 10.0  # of 0, 30, 10
    assert result["p90_error_min"] == 30.0  # nearest rank: the highest of three
    assert result["anchor_now_median_error_min"] == 35.0  # of 10, 35, 38
    assert result["anchor_now_p90_error_min"] == 38.0
    assert result["not_scored"] == {
        "estimated, never started": 1,
        "null estimate, never started": 1,
        "null estimate, started later": 1,
    }


def test_a_late_start_is_put_down_to_the_pods_on_its_gpu_model_that_started_between_estimate_and_start():
    first = {
        (1, "w"): (minutes(0), minutes(10)),
        (1, "v"): (minutes(0), minutes(10)),
        (1, "x"): (minutes(0), minutes(10)),
    }
    started = {(1, "w"): minutes(20), (1, "v"): minutes(20), (1, "x"): minutes(10)}
    pods = [
        ((1, "w"), 5, minutes(-1), minutes(20)),
        ((1, "v"), 6, minutes(-1), minutes(20)),
        ((1, "x"), 5, minutes(-1), minutes(10)),  # on time: no cause counted
        ((1, "later"), 5, minutes(2), minutes(10)),  # w's tenant and model, arrived after w's estimate
        ((2, "queued"), 5, minutes(-2), minutes(12)),  # another tenant's, waiting at the estimate
        ((2, "other"), 6, minutes(2), minutes(10)),  # v's model, another tenant's later arrival
        ((1, "after"), 6, minutes(3), minutes(25)),  # v's tenant and model, started after v
        ((3, "before"), 6, minutes(-9), minutes(-1)),  # started before the estimate: foreseen
    ]

    assert late_causes(first, started, pods) == {
        "a later arrival of its tenant": 1,
        "another tenant's later arrival": 1,
        "another tenant's waiting workload": 1,
        "its tenant's waiting workload (replayed)": 1,  # x, before w
    }
