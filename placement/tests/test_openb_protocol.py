"""The FGD evaluation protocol: arrival order, inflation, and the allocation curve."""

import json

import numpy as np
import pytest

from benchmarks.placement.__main__ import main
from benchmarks.placement.openb import arrival_order, curve, run_seed
from benchmarks.placement.trace import read_nodes, read_pods
from placement.tests.factories import make_pod


def test_arrivals_are_a_seeded_shuffle_of_the_name_sorted_pods():
    pods = [make_pod(f"p{i:02d}") for i in range(20)]
    a = arrival_order(pods, 100_000, seed=42, tune=0)
    assert sorted(p.name for p in a) == [p.name for p in pods]
    assert [p.name for p in arrival_order(list(reversed(pods)), 100_000, 42, 0)] == [p.name for p in a]
    assert [p.name for p in arrival_order(pods, 100_000, 43, 0)] != [p.name for p in a]


def test_inflation_stops_before_passing_the_target():
    pods = [make_pod(f"p{i}", milli=500) for i in range(10)]  # 5,000 milli of 10,000 capacity
    order = arrival_order(pods, 10_000, seed=1, tune=1.3)
    total = sum(p.total_gpu_milli for p in order)
    assert 12_500 < total <= 13_000
    assert len({p.name for p in order}) == len(order)


def test_the_curve_reads_the_state_after_the_last_arrival_below_each_mark():
    arrived = np.array([400, 800, 1200])
    allocated = np.array([400, 400, 1200])
    points = curve(arrived, allocated, capacity_milli=1000)
    assert points[0] == 0
    assert points[40] == 40
    assert points[80] == 40
    assert points[120] == 120


def test_a_run_on_the_slice_never_allocates_more_than_arrived(node_csv, pod_csv):
    nodes = read_nodes(node_csv)
    pods = [p.request for p in read_pods(pod_csv)]
    result = run_seed(nodes, pods, "default", seed=42, tune=1.3)
    assert all(result.curve[k] <= k + 1e-9 for k in range(131))
    assert result.arrived_pods > len(pods)


def test_the_command_prints_json_with_the_whole_curve(node_csv, pod_csv, capsys):
    assert (
        main(["openb", "--nodes", str(node_csv), "--pods", str(pod_csv), "--seeds", "42-43", "--json"]) == 0
    )
    summary = json.loads(capsys.readouterr().out)
    assert len(summary["runs"]) == 2
    assert len(summary["mean_curve"]) == 131


def test_the_command_rejects_a_csv_with_wrong_columns(node_csv, capsys):
    assert main(["openb", "--nodes", str(node_csv), "--pods", str(node_csv), "--seeds", "42"]) == 2
    assert "expected name,cpu_milli" in capsys.readouterr().err


def test_the_suite_sets_each_policy_beside_the_published_figures(node_csv, pod_csv, tmp_path, capsys):
    trace = tmp_path / "csv"
    trace.mkdir()
    (trace / "openb_pod_list_slice.csv").write_text(pod_csv.read_text())
    published = tmp_path / "analysis_allo_discrete.csv"
    header = "workload,sc_policy,tune,seed,total_gpus," + ",".join(str(k) for k in range(131))
    rows = [
        f"openb_pod_list_slice,{name},1.3,{seed},8," + ",".join(["0"] * 100 + [str(alloc)] + ["0"] * 30)
        for name, alloc in (("06-FGD", 1.0), ("05-BestFit", 0.5), ("01-Random", 0.1))
        for seed in (42, 43)
    ]
    published.write_text("\n".join([header, *rows]) + "\n")
    args = ["suite", "--nodes", str(node_csv), "--trace-dir", str(trace), "--published", str(published)]
    assert main([*args, "--policies", "default,fgd", "--seeds", "42", "--jobs", "1", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    (row,) = summary["rows"]
    assert row["workload"] == "slice"
    assert row["set"] == "published"
    assert set(row) == {
        "workload",
        "set",
        "default",
        "fgd",
        "published fgd",
        "published best-fit",
    }
    assert row["published fgd"] == {"unallocated": 99.0, "band": "1.00-1.00"}
    assert summary["first_policy_below"]["published fgd"] == [1, 1]
    assert summary["first_policy_below"]["published best-fit"] == [1, 1]
    assert summary["first_policy_below"]["fgd"][1] == 1


def test_the_suite_refuses_an_unknown_policy(capsys):
    assert main(["suite", "--policies", "default,magic"]) == 2
    assert "unknown policy ['magic']" in capsys.readouterr().err


def test_the_replay_through_the_extender_places_exactly_as_in_process(node_csv, pod_csv, capsys):
    argv = ["openb", "--via-extender", "--nodes", str(node_csv), "--pods", str(pod_csv), "--seeds", "42-43"]
    assert main([*argv, "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["all_identical"]
    assert len(summary["seeds"]) == 2
    assert summary["mean_unallocated_via_extender"] == summary["mean_unallocated_in_process"]
    assert all(s["calls"] > 100 for s in summary["seeds"])
    assert summary["prioritize_ms_p99"] > 0


def test_the_suite_refuses_an_unknown_set(capsys):
    assert main(["suite", "--set", "published,secret"]) == 2
    assert "unknown set ['secret']" in capsys.readouterr().err


def test_the_suite_draws_one_curve_file_per_workload(node_csv, pod_csv, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    trace = tmp_path / "csv"
    trace.mkdir()
    (trace / "openb_pod_list_slice.csv").write_text(pod_csv.read_text())
    published = tmp_path / "none.csv"
    published.write_text("workload,sc_policy,tune,seed,100\n")
    argv = ["suite", "--nodes", str(node_csv), "--trace-dir", str(trace), "--published", str(published)]
    argv += ["--workloads", "slice", "--policies", "default,fgd", "--seeds", "42-43", "--jobs", "1"]
    assert main([*argv, "--plot", str(tmp_path / "plots"), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    (png,) = summary["plots"]
    assert png.endswith("slice.png")
    assert (tmp_path / "plots" / "slice.png").read_bytes()[:4] == b"\x89PNG"
