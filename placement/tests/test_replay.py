"""Replay with departures: event order, lifetime stretch, and a run on the committed slice."""

from benchmarks.placement.__main__ import main
from benchmarks.placement.replay import events
from benchmarks.placement.trace import TracePod
from placement.tests.factories import make_pod


def test_events_come_in_time_order_with_stretched_lifetimes():
    pods = [
        TracePod(make_pod("a"), 10, 20),
        TracePod(make_pod("b"), 0, 100),
        TracePod(make_pod("c"), 5, None),
    ]
    timeline = [(t, kind, p.request.name) for t, kind, p in events(pods, stretch=2.0)]
    assert timeline == [(0, 0, "b"), (5, 0, "c"), (10, 0, "a"), (30, 1, "a"), (200, 1, "b")]


def test_the_replay_command_runs_on_the_slice(node_csv, pod_csv, capsys):
    assert main(["replay", "--nodes", str(node_csv), "--pods", str(pod_csv), "--json"]) == 0
    out = capsys.readouterr().out
    assert '"failed_pods"' in out
    assert '"peak_allocation_pct"' in out


def test_the_replay_refuses_a_list_without_times(tmp_path, node_csv, capsys):
    path = tmp_path / "multigpu.csv"
    path.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1000,1024,1,1000\n")
    assert main(["replay", "--nodes", str(node_csv), "--pods", str(path)]) == 2
    assert "creation_time" in capsys.readouterr().err
