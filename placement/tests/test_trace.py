"""Reading the openb CSVs, and rejecting anything else with file and line."""

import pytest

from benchmarks.placement.trace import read_nodes, read_pods
from placement.engine.errors import MalformedTraceRow


def test_it_reads_the_committed_slices(node_csv, pod_csv):
    nodes, pods = read_nodes(node_csv), read_pods(pod_csv)
    assert len(nodes) == 24
    assert nodes[0].gpus > 0
    assert len(pods) == 60
    assert all(p.created is not None for p in pods)


def test_it_reads_the_short_multigpu_format(tmp_path):
    path = tmp_path / "multigpu.csv"
    path.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1000,1024,2,1000\n")
    (pod,) = read_pods(path)
    assert pod.request.num_gpu == 2
    assert pod.created is None


def test_it_rejects_wrong_columns_naming_the_file(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("name,cpu,gpu\np0,1,2\n")
    with pytest.raises(MalformedTraceRow, match=r"bad\.csv:1"):
        read_pods(path)


def test_it_rejects_a_node_list_given_as_pods(node_csv):
    with pytest.raises(MalformedTraceRow, match="expected name,cpu_milli"):
        read_pods(node_csv)


def test_it_names_the_line_of_a_malformed_row(tmp_path):
    path = tmp_path / "pods.csv"
    path.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1000,1024,1,500\np1,lots,1024,1,500\n")
    with pytest.raises(MalformedTraceRow, match=r"cpu_milli.*pods\.csv:3"):
        read_pods(path)


def test_it_rejects_a_multi_gpu_share(tmp_path):
    path = tmp_path / "pods.csv"
    path.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1000,1024,2,500\n")
    with pytest.raises(MalformedTraceRow, match="whole GPUs"):
        read_pods(path)
