"""The FGD evaluation protocol on the Alibaba openb trace (Weng et al., ATC '23, §6.1).

Per seed: sort the pods by name, shuffle them with the seed, append copies drawn uniformly (with
replacement) from the name-sorted list until the next one would take the total GPU request past
``tune`` x cluster capacity, then let every pod arrive once, in order, and never leave. After each arrival
record the GPU request that has arrived and the GPU milli allocated. This mirrors the authors' simulator
(``SortClusterPods`` then ``TunePodsByNodeTotalResource``, whose stop test compares the *per-GPU* milli of
the drawn pod). Their Go ``math/rand`` stream is not reproduced bit for bit, so individual seeds differ
from theirs while the distribution over seeds is the same.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from benchmarks.placement.trace import read_nodes, read_pods
from placement.engine.fleet import MILLI, NodeSpec, PodRequest
from placement.engine.placer import Engine

CURVE_POINTS = 131  # arrived = 0 … 130 % of capacity


@dataclass(frozen=True)
class SeedResult:
    """One seed: the allocation-ratio curve (index k = arrived k %), failures and wall time."""

    seed: int
    curve: list[float]
    arrived_pods: int
    failed_pods: int
    wall_seconds: float

    @property
    def alloc_100(self) -> float:
        """GPU allocation ratio (%) when the arrived GPU request reaches 100 % of capacity."""
        return self.curve[100]

    @property
    def alloc_130(self) -> float:
        """GPU allocation ratio (%) at 130 % arrived."""
        return self.curve[130]


def arrival_order(
    pods: Sequence[PodRequest], capacity_milli: int, seed: int, tune: float
) -> list[PodRequest]:
    """The protocol's arrival sequence for one seed (steps 2 and 3 of the protocol)."""
    ordered = sorted(pods, key=lambda p: p.name)
    rng = np.random.default_rng(seed)
    arrivals = [ordered[i] for i in rng.permutation(len(ordered))]
    total = sum(p.total_gpu_milli for p in ordered)
    target = tune * capacity_milli
    if tune <= 0:
        return arrivals
    while total > target and arrivals:  # tune down: drop random pods
        total -= arrivals.pop(int(rng.integers(len(arrivals)))).total_gpu_milli
    i = 0
    while total < target:
        drawn = ordered[int(rng.integers(len(ordered)))]
        if total + drawn.gpu_milli > target:
            break
        arrivals.append(dataclasses.replace(drawn, name=f"{drawn.name}-tuned-{i}"))
        total += drawn.total_gpu_milli
        i += 1
    return arrivals


def curve(arrived: np.ndarray, allocated: np.ndarray, capacity_milli: int) -> list[float]:
    """Allocation ratio (%) at arrived = 0 … 130 %: the state after the last arrival not past each mark."""
    marks = np.arange(CURVE_POINTS) * capacity_milli / 100
    last = np.searchsorted(arrived, marks, side="right") - 1
    values = np.where(last >= 0, allocated[np.maximum(last, 0)], 0) * 100 / capacity_milli
    return [round(float(v), 3) for v in values]


def run_seed(
    nodes: Sequence[NodeSpec], pods: Sequence[PodRequest], policy: str, seed: int, tune: float
) -> SeedResult:
    """Run the whole protocol for one seed on a fresh fleet."""
    start = time.perf_counter()
    # The simulator prefixes node names with a seeded permutation, which fixes the order ties are broken in.
    nodes = [nodes[i] for i in np.random.default_rng(seed + 1_000_003).permutation(len(nodes))]
    engine = Engine(nodes, policy, workload=sorted(pods, key=lambda p: p.name), seed=seed)
    capacity = engine.fleet.total_gpus() * MILLI
    order = arrival_order(pods, capacity, seed, tune)
    arrived = np.zeros(len(order), dtype=np.int64)
    allocated = np.zeros(len(order), dtype=np.int64)
    got, failed = 0, 0
    for n, pod in enumerate(order):
        if engine.try_place(pod) is None:
            failed += 1
        else:
            got += pod.total_gpu_milli
        arrived[n] = (arrived[n - 1] if n else 0) + pod.total_gpu_milli
        allocated[n] = got
    wall = time.perf_counter() - start
    return SeedResult(seed, curve(arrived, allocated, capacity), len(order), failed, round(wall, 2))


def run(args: argparse.Namespace) -> dict[str, Any]:
    """The ``openb`` command: every seed, a line per seed and a mean line (or, with --json, one summary)."""
    nodes = read_nodes(args.nodes)
    pods = [p.request for p in read_pods(args.pods)]
    results = []
    for seed in args.seeds:
        results.append(run_seed(nodes, pods, args.policy, seed, args.tune))
        if not args.json:
            print(_seed_line(results[-1]), flush=True)
    summary = _summary(args, results)
    if args.json:
        summary.update(_curves(results))
    else:
        print(_mean_line(summary, len(results)))
    return summary


def _seed_line(r: SeedResult) -> str:
    return (
        f"seed {r.seed}: alloc@100 {r.alloc_100:6.2f} %  alloc@130 {r.alloc_130:6.2f} %  "
        f"unallocated@100 {100 - r.alloc_100:5.2f} %  failed {r.failed_pods}/{r.arrived_pods}  "
        f"wall {r.wall_seconds:.1f} s"
    )


def _summary(args: argparse.Namespace, results: list[SeedResult]) -> dict[str, Any]:
    mean_100 = statistics.fmean(r.alloc_100 for r in results)
    return {
        "workload": args.pods.stem,
        "policy": args.policy,
        "tune": args.tune,
        "seeds": args.seeds,
        "mean_alloc_100": round(mean_100, 3),
        "mean_alloc_130": round(statistics.fmean(r.alloc_130 for r in results), 3),
        "mean_unallocated_100": round(100 - mean_100, 3),
        "min_alloc_100": min(r.alloc_100 for r in results),
        "max_alloc_100": max(r.alloc_100 for r in results),
        "mean_wall_seconds": round(statistics.fmean(r.wall_seconds for r in results), 2),
    }


def _curves(results: list[SeedResult]) -> dict[str, Any]:
    """Per-seed curves and their mean, for --json."""
    runs = [dataclasses.asdict(r) for r in results]
    mean = [round(statistics.fmean(r.curve[k] for r in results), 3) for k in range(CURVE_POINTS)]
    return {"runs": runs, "mean_curve": mean}


def _mean_line(summary: dict[str, Any], n: int) -> str:
    return (
        f"mean ({n} seeds) {summary['workload']} {summary['policy']}: "
        f"alloc@100 {summary['mean_alloc_100']:.2f} %  alloc@130 {summary['mean_alloc_130']:.2f} %  "
        f"unallocated@100 {summary['mean_unallocated_100']:.2f} %  "
        f"band alloc@100 {summary['min_alloc_100']:.2f}-{summary['max_alloc_100']:.2f}  "
        f"wall {summary['mean_wall_seconds']:.1f} s/seed"
    )
