"""openb-style workloads the policies were never tuned on, generated from the base trace.

The FGD authors derived their variants from ``openb_pod_list_default`` by resampling one class of pods at a
time (measured on their published lists):

- ``gpushareXX``: the GPU pods are redrawn from the base's GPU pods, as many as before, until fractional pods
  hold XX % of the requested GPU milli;
- ``gpuspecXX``: XX % of the GPU pods are given a GPU-model constraint (``gpu_spec``: ``V100M16|V100M32``);
- ``multigpuXX``: multi-GPU pods drawn from the base's are appended until they hold XX % of the GPU milli;
- ``cpuXXX``: the CPU-only pods are redrawn from the base's CPU-only pods to a new total of cores.

:func:`generate` does the same, all four at once, with a seed. Shares are in percent: ``share`` of the GPU
milli in fractional pods, ``multi`` of the GPU milli in multi-GPU pods, ``spec`` of the GPU pods constrained
to a model, ``cpu`` of the fleet's cores requested by CPU-only pods (the base: 17.9 %). A constraint is drawn
from the ``gpu_spec`` values of the published ``gpuspec`` lists (the trace's own vocabulary, weighted by how
often they occur there) among those that some node of the fleet could host the pod under. Rows keep the
drawn pod's columns (qos, phase, times); the list is sorted by creation time and renamed ``gen-pod-NNNNN``,
so the output is in the openb format and the same arguments give the same bytes.
"""

from __future__ import annotations

import csv
import hashlib
import io
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from benchmarks.placement.trace import POD_COLUMNS_FULL, read_nodes
from placement.engine.errors import EngineError
from placement.engine.fleet import MILLI, NodeSpec

Row = dict[str, str]


@dataclass(frozen=True)
class Params:
    """One generated workload: target shares in percent (``None`` keeps the base's) and a seed."""

    seed: int
    spec: float = 0.0
    share: float | None = None
    multi: float | None = None
    cpu: float | None = None

    def describe(self) -> str:
        """The arguments, as the ``generate`` command takes them."""
        parts = [f"--seed {self.seed}", f"--spec {self.spec:g}"]
        optional = (("share", self.share), ("multi", self.multi), ("cpu", self.cpu))
        parts += [f"--{k} {v:g}" for k, v in optional if v is not None]
        return " ".join(parts)


def read_rows(path: Path) -> list[Row]:
    """The rows of a full-format openb pod list, as strings."""
    try:
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            if reader.fieldnames != POD_COLUMNS_FULL:
                raise EngineError(f"columns must be {','.join(POD_COLUMNS_FULL)}", str(path))
            return list(reader)
    except OSError as e:
        raise EngineError(f"cannot read file: {e.strerror}", str(path)) from None


def _milli(row: Row) -> int:
    return int(row["num_gpu"]) * int(row["gpu_milli"])


def _is_share(row: Row) -> bool:
    return row["num_gpu"] == "1" and int(row["gpu_milli"]) < MILLI


def _fits(row: Row, models: frozenset[str], nodes: Sequence[NodeSpec]) -> bool:
    """Whether some empty node of one of ``models`` could host the pod."""
    return any(
        n.model in models
        and n.gpus >= int(row["num_gpu"])
        and n.cpu_milli >= int(row["cpu_milli"])
        and n.memory_mib >= int(row["memory_mib"])
        for n in nodes
    )


def spec_vocabulary(lists: Sequence[Path]) -> Counter[str]:
    """``gpu_spec`` values of the given lists (duplicated models in one value removed), with their counts."""
    counts: Counter[str] = Counter()
    for path in lists:
        for row in read_rows(path):
            if row["gpu_spec"]:
                counts["|".join(sorted(set(row["gpu_spec"].split("|"))))] += 1
    return counts


def _pool(rows: list[Row], what: str) -> list[Row]:
    if not rows:
        raise EngineError(f"the base list has no {what} to draw from", "generate")
    return rows


def _redraw_gpu_pods(rng: np.random.Generator, gpu: list[Row], share: float) -> list[Row]:
    """As many GPU pods as the base has, drawn so that fractional pods hold ``share`` % of the GPU milli."""
    shares = _pool([r for r in gpu if _is_share(r)], "fractional GPU pods")
    wholes = _pool([r for r in gpu if not _is_share(r)], "whole-GPU pods")
    out: list[Row] = []
    got_share = got_all = 0
    for _ in range(len(gpu)):
        pool = shares if got_all == 0 or 100 * got_share / got_all < share else wholes
        row = pool[int(rng.integers(len(pool)))]
        out.append(row)
        got_all += _milli(row)
        got_share += _milli(row) if _is_share(row) else 0
    return out


def _set_multi(rng: np.random.Generator, gpu: list[Row], base_multi: list[Row], multi: float) -> list[Row]:
    """Append (or drop) multi-GPU pods until they hold ``multi`` % of the GPU milli."""
    total = sum(_milli(r) for r in gpu)
    held = sum(_milli(r) for r in gpu if int(r["num_gpu"]) > 1)
    out = list(gpu)
    while held > multi / 100 * total:
        ids = [i for i, r in enumerate(out) if int(r["num_gpu"]) > 1]
        row = out.pop(ids[int(rng.integers(len(ids)))])
        held -= _milli(row)
        total -= _milli(row)
    while held < multi / 100 * total:
        row = base_multi[int(rng.integers(len(base_multi)))]
        out.append(row)
        held += _milli(row)
        total += _milli(row)
    return out


def _redraw_cpu_pods(rng: np.random.Generator, cpu_pods: list[Row], cores_milli: float) -> list[Row]:
    """CPU-only pods drawn from the base's until their cores reach ``cores_milli``."""
    out: list[Row] = []
    got = 0
    while got < cores_milli:
        row = cpu_pods[int(rng.integers(len(cpu_pods)))]
        out.append(row)
        got += int(row["cpu_milli"])
    return out


def _constrain(
    rng: np.random.Generator, gpu: list[Row], spec: float, vocab: Counter[str], nodes: Sequence[NodeSpec]
) -> list[Row]:
    """Give ``spec`` % of the GPU pods (chosen at random) a model constraint the fleet can host."""
    values = sorted(vocab)
    weights = np.array([vocab[v] for v in values], dtype=np.float64)
    chosen = rng.permutation(len(gpu))[: round(spec / 100 * len(gpu))]
    out = [dict(r, gpu_spec="") for r in gpu]
    for i in sorted(int(c) for c in chosen):
        ok = np.array([_fits(out[i], frozenset(v.split("|")), nodes) for v in values])
        if not ok.any():
            continue
        w = np.where(ok, weights, 0)
        out[i]["gpu_spec"] = values[int(rng.choice(len(values), p=w / w.sum()))]
    return out


def generate(
    base: Sequence[Row], nodes: Sequence[NodeSpec], vocab: Counter[str], params: Params
) -> list[Row]:
    """A new pod list from the base trace (see the module docstring)."""
    if not 0 <= params.spec <= 100:
        raise EngineError("spec must be a percentage (0-100)", "--spec")
    for name, value in (("share", params.share), ("multi", params.multi)):
        if value is not None and not 0 <= value < 100:
            raise EngineError(f"{name} must be a percentage below 100", f"--{name}")
    if params.cpu is not None and not 0 <= params.cpu <= 200:
        raise EngineError("cpu must be a percentage of the fleet's cores (0-200)", "--cpu")
    rng = np.random.default_rng(params.seed)
    gpu = [r for r in base if r["num_gpu"] != "0"]
    cpu_pods = [r for r in base if r["num_gpu"] == "0"]
    if params.share is not None:
        gpu = _redraw_gpu_pods(rng, gpu, params.share)
    if params.multi is not None:
        multi = _pool([r for r in base if int(r["num_gpu"]) > 1], "multi-GPU pods")
        gpu = _set_multi(rng, gpu, multi, params.multi)
    if params.cpu is not None:
        cores = params.cpu / 100 * sum(n.cpu_milli for n in nodes)
        cpu_pods = _redraw_cpu_pods(rng, _pool(cpu_pods, "CPU-only pods"), cores)
    rows = _constrain(rng, gpu, params.spec, vocab, nodes) + [dict(r, gpu_spec="") for r in cpu_pods]
    # Sorted by creation time as the base is; the drawn index breaks ties, so the order is reproducible.
    order = sorted(range(len(rows)), key=lambda i: (int(rows[i]["creation_time"] or 0), i))
    width = max(5, len(str(len(rows))))
    return [dict(rows[i], name=f"gen-pod-{n:0{width}d}") for n, i in enumerate(order)]


def to_csv(rows: Sequence[Row]) -> bytes:
    """The list as openb CSV bytes (``\\n`` line ends, the full column set)."""
    out = io.StringIO()
    writer = csv.DictWriter(out, POD_COLUMNS_FULL, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue().encode()


def sha256(data: bytes) -> str:
    """Hex digest, as the workload sets record it."""
    return hashlib.sha256(data).hexdigest()


def build(trace_dir: Path, nodes_csv: Path, params: Params) -> bytes:
    """Generate one workload from the trace directory's base list and ``gpuspec`` lists."""
    base = read_rows(trace_dir / "openb_pod_list_default.csv")
    vocab = spec_vocabulary(sorted(trace_dir.glob("openb_pod_list_gpuspec*.csv")))
    if not vocab:
        raise EngineError("no gpuspec lists to draw GPU-model constraints from", str(trace_dir))
    return to_csv(generate(base, read_nodes(nodes_csv), vocab, params))
