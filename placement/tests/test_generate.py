"""Generated openb-style workloads: reproducible to the byte, and the shares they are asked for."""

import csv
import gzip
import io
import json
from collections import Counter
from pathlib import Path

import pytest

from benchmarks.placement.__main__ import main
from benchmarks.placement.generate import Params, generate, read_rows, sha256, to_csv
from benchmarks.placement.trace import read_nodes, read_pods
from benchmarks.placement.workloads import SETS, list_bytes
from placement.engine.errors import EngineError

VOCAB = Counter({"T4": 3, "G2": 2, "V100M16|V100M32": 1})
# The lists generation reads (the base list, the gpuspec lists' vocabulary, the nodes), committed gzipped as
# fixtures (data/README.md, byte-identical to the trace's) so the tests run wherever the checkout is.
FIXTURES = Path(__file__).parent / "data" / "openb"


@pytest.fixture(scope="session")
def trace(tmp_path_factory) -> tuple[Path, Path]:
    """(trace directory, GPU node list) holding the openb lists generation reads."""
    out = tmp_path_factory.mktemp("openb")
    for packed in FIXTURES.glob("*.csv.gz"):
        (out / packed.name.removesuffix(".gz")).write_bytes(gzip.decompress(packed.read_bytes()))
    return out, out / "openb_node_list_gpu_node.csv"


def _rows(data: bytes) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(data.decode())))


def _gpu_share(rows, test) -> float:
    gpu = [r for r in rows if r["num_gpu"] != "0"]
    total = sum(int(r["num_gpu"]) * int(r["gpu_milli"]) for r in gpu)
    return 100 * sum(int(r["num_gpu"]) * int(r["gpu_milli"]) for r in gpu if test(r)) / total


def test_the_same_parameters_give_the_same_bytes_and_another_seed_does_not(pod_csv, node_csv):
    base, nodes = read_rows(pod_csv), read_nodes(node_csv)
    a = to_csv(generate(base, nodes, VOCAB, Params(7, spec=30, share=50, cpu=10)))
    b = to_csv(generate(base, nodes, VOCAB, Params(7, spec=30, share=50, cpu=10)))
    c = to_csv(generate(base, nodes, VOCAB, Params(8, spec=30, share=50, cpu=10)))
    assert a == b
    assert a != c


def test_a_share_the_base_cannot_supply_is_a_clear_error(pod_csv, node_csv, capsys):
    base, nodes = read_rows(pod_csv), read_nodes(node_csv)
    with pytest.raises(EngineError, match="no multi-GPU pods"):
        generate(base, nodes, VOCAB, Params(7, multi=20))
    with pytest.raises(EngineError, match="spec must be a percentage"):
        generate(base, nodes, VOCAB, Params(7, spec=120))


def test_a_generated_list_is_an_openb_list_the_benchmark_reads(pod_csv, node_csv, tmp_path):
    out = tmp_path / "w.csv"
    argv = ["generate", "--out", str(out), "--seed", "3", "--spec", "40", "--share", "50"]
    assert main([*argv, "--nodes", str(node_csv), "--trace-dir", str(pod_csv.parent), "--json"]) == 2
    # The slice directory has no base list named openb_pod_list_default.csv: a clear error, not a crash.
    base = tmp_path / "trace"
    base.mkdir()
    (base / "openb_pod_list_default.csv").write_bytes(pod_csv.read_bytes())
    (base / "openb_pod_list_gpuspec10.csv").write_text(pod_csv.read_text().replace(",,LS,", ",T4,LS,", 3))
    assert main([*argv, "--nodes", str(node_csv), "--trace-dir", str(base)]) == 0
    pods = read_pods(out)
    assert pods
    assert all(p.request.name.startswith("gen-pod-") for p in pods)
    gpu = [p for p in pods if p.request.num_gpu]
    assert sum(1 for p in gpu if p.request.gpu_models) == round(0.4 * len(gpu))


@pytest.mark.parametrize("share", [20, 50, 70])
def test_fractional_pods_hold_the_share_of_gpu_milli_asked(share, trace):
    base, nodes = read_rows(trace[0] / "openb_pod_list_default.csv"), read_nodes(trace[1])
    rows = generate(base, nodes, VOCAB, Params(1, share=share))
    assert abs(_gpu_share(rows, lambda r: int(r["gpu_milli"]) < 1000) - share) < 1
    assert sum(1 for r in rows if r["num_gpu"] != "0") == sum(1 for r in base if r["num_gpu"] != "0")


def test_multi_gpu_pods_and_cpu_only_cores_reach_their_targets(trace):
    base, nodes = read_rows(trace[0] / "openb_pod_list_default.csv"), read_nodes(trace[1])
    rows = generate(base, nodes, VOCAB, Params(2, multi=30, cpu=25))
    assert 30 <= _gpu_share(rows, lambda r: int(r["num_gpu"]) > 1) < 31
    cores = sum(int(r["cpu_milli"]) for r in rows if r["num_gpu"] == "0")
    assert 25 <= 100 * cores / sum(n.cpu_milli for n in nodes) < 25.5


def test_every_model_constraint_names_models_that_could_host_the_pod(trace):
    base, nodes = read_rows(trace[0] / "openb_pod_list_default.csv"), read_nodes(trace[1])
    rows = generate(base, nodes, Counter({"T4": 5, "G2": 1}), Params(3, spec=50))
    eight = [r for r in rows if r["num_gpu"] == "8" and r["gpu_spec"]]
    assert eight
    assert all(r["gpu_spec"] == "G2" for r in eight)  # no 8-GPU T4 node exists


@pytest.mark.parametrize("name", [n for s in SETS.values() for n in s])
def test_every_committed_workload_regenerates_byte_identically(name, trace):
    w = next(s[name] for s in SETS.values() if name in s)
    assert sha256(list_bytes(name, *trace)) == w.sha256


def test_validation_and_test_sets_are_disjoint_and_large_enough():
    assert len(SETS["validation"]) >= 12
    assert len(SETS["test"]) >= 6
    params = [w.params for s in SETS.values() for w in s.values()]
    assert len(set(params)) == len(params)
    assert {p.seed for p in params}.isdisjoint(range(42, 52))  # none shares a protocol seed


def test_the_set_command_reports_every_digest_matching(tmp_path, capsys, trace):
    argv = ["generate", "--set", "test", "--out", str(tmp_path / "out"), "--json"]
    assert main([*argv, "--trace-dir", str(trace[0]), "--nodes", str(trace[1])]) == 0
    written = json.loads(capsys.readouterr().out)["workloads"]
    assert written.keys() == SETS["test"].keys()
    assert all(w["matches"] for w in written.values())
