"""Every openb workload the FGD authors published, for several policies, against their figures in one table.

``python -m benchmarks.placement suite --policies default,fgd,best-fit --seeds 42-51 --jobs 2`` runs the FGD
protocol (:mod:`benchmarks.placement.openb`) for each workload x policy x seed, ``--jobs`` at a time in
separate processes, and prints per workload the mean unallocated GPU % at arrived = 100 % of each policy next
to the published FGD and Best-fit means and seed bands
(``fgd-expected-results/analysis_allo_discrete.csv``, the authors' own runs), then how many workloads the
first policy wins against published FGD and Best-fit.
"""

from __future__ import annotations

import argparse
import csv
import functools
import statistics
import tempfile
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.placement import plot, workloads
from benchmarks.placement.openb import run_seed
from benchmarks.placement.trace import read_nodes, read_pods
from placement.engine.errors import EngineError
from placement.engine.fleet import NodeSpec, PodRequest
from placement.engine.policies import POLICIES

PUBLISHED_POLICIES = {"fgd": "06-FGD", "best-fit": "05-BestFit"}


@dataclass(frozen=True)
class Published:
    """The authors' allocation ratios at arrived = 100 % for one workload and policy, one per seed."""

    alloc_100: tuple[float, ...]

    @property
    def unallocated(self) -> float:
        """Mean unallocated GPU %."""
        return 100 - statistics.fmean(self.alloc_100)

    @property
    def band(self) -> str:
        """Min-max allocation ratio over the seeds."""
        return f"{min(self.alloc_100):.2f}-{max(self.alloc_100):.2f}"


def published(path: Path) -> dict[tuple[str, str], Published]:
    """(workload, our policy name) -> the authors' figures; only FGD and Best-fit are read."""
    names = {v: k for k, v in PUBLISHED_POLICIES.items()}
    runs: dict[tuple[str, str], list[float]] = defaultdict(list)
    try:
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                if row["sc_policy"] in names:
                    workload = row["workload"].removeprefix("openb_pod_list_")
                    runs[(workload, names[row["sc_policy"]])].append(float(row["100"]))
    except (OSError, KeyError) as e:
        raise EngineError(f"cannot read published results: {e}", str(path)) from None
    return {k: Published(tuple(v)) for k, v in runs.items()}


@functools.cache
def _load(nodes_csv: Path, pods_csv: Path) -> tuple[tuple[NodeSpec, ...], tuple[PodRequest, ...]]:
    """The trace files, read once per worker process (a process runs many seeds of one workload)."""
    return tuple(read_nodes(nodes_csv)), tuple(p.request for p in read_pods(pods_csv))


def _one(job: tuple[Path, Path, str, int, float]) -> tuple[str, str, int, list[float], float]:
    nodes_csv, pods_csv, policy, seed, tune = job
    nodes, pods = _load(nodes_csv, pods_csv)
    r = run_seed(nodes, pods, policy, seed, tune)
    return pods_csv.stem.removeprefix("openb_pod_list_"), policy, seed, r.curve, r.wall_seconds


def _sets(args: argparse.Namespace) -> list[str]:
    sets = [s.strip() for s in args.set.split(",") if s.strip()]
    unknown = [s for s in sets if s != "published" and s not in workloads.SETS]
    if unknown or not sets:
        raise EngineError(f"unknown set {unknown}; known: published, {', '.join(workloads.SETS)}", "--set")
    return sets


def _workloads(
    args: argparse.Namespace, anchors: dict[tuple[str, str], Published], scratch: Path
) -> dict[str, tuple[str, Path]]:
    """Workload name -> (set, pod list path); generated ones written to ``scratch``, checked."""
    sets = _sets(args)
    chosen: dict[str, tuple[str, Path]] = {}
    for s in sets:
        names = sorted({w for w, _ in anchors}) if s == "published" else list(workloads.SETS[s])
        for name in names:
            if s == "published":
                chosen[name] = (s, args.trace_dir / f"openb_pod_list_{name}.csv")
            else:
                path = scratch / f"openb_pod_list_{name}.csv"
                path.write_bytes(workloads.list_bytes(name, args.trace_dir, args.nodes))
                chosen[name] = (s, path)
    if args.workloads:
        wanted = [w for w in args.workloads.split(",") if w]
        for w in wanted:
            if w not in chosen:  # any list in the trace directory, as before the sets
                chosen[w] = ("published", args.trace_dir / f"openb_pod_list_{w}.csv")
        chosen = {w: chosen[w] for w in wanted}
    return chosen


def run(args: argparse.Namespace) -> dict[str, Any]:
    """The ``suite`` command: run everything, print the table (or return it for --json)."""
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    unknown = [p for p in policies if p not in POLICIES]
    if unknown or not policies:
        raise EngineError(f"unknown policy {unknown}; known: {', '.join(POLICIES)}", "--policies")
    _sets(args)  # refused before any file is read
    anchors = published(args.published)
    with tempfile.TemporaryDirectory(prefix="placement-suite-") as scratch:
        chosen = _workloads(args, anchors, Path(scratch))
        jobs = [
            (args.nodes, path, p, s, args.tune)
            for _, path in chosen.values()
            for p in policies
            for s in args.seeds
        ]
        for _, pods_csv, *_ in jobs:
            if not pods_csv.exists():
                raise EngineError("no such workload file", str(pods_csv))
        results: dict[tuple[str, str], dict[int, tuple[float, float]]] = defaultdict(dict)
        curves: dict[tuple[str, str], dict[int, list[float]]] = defaultdict(dict)
        with ProcessPoolExecutor(max_workers=args.jobs) as pool:
            for workload, policy, seed, points, wall in pool.map(_one, jobs):
                results[(workload, policy)][seed] = (points[100], wall)
                curves[(workload, policy)][seed] = points
    sets = {w: s for w, (s, _) in chosen.items()}
    summary = _summarise(list(chosen), policies, results, anchors, sets)
    if args.plot is not None:
        summary["plots"] = plot.curves(args.plot, list(chosen), policies, curves, sets)
    if not args.json:
        print(_table(summary, policies))
    return summary


def _summarise(
    workloads: list[str],
    policies: list[str],
    results: dict[tuple[str, str], dict[int, tuple[float, float]]],
    anchors: dict[tuple[str, str], Published],
    sets: dict[str, str],
) -> dict[str, Any]:
    rows = []
    for w in workloads:
        row: dict[str, Any] = {"workload": w, "set": sets[w]}
        for p in policies:
            allocs = [a for a, _ in results[(w, p)].values()]
            row[p] = {
                "unallocated": round(100 - statistics.fmean(allocs), 3),
                "band": f"{min(allocs):.2f}-{max(allocs):.2f}",
                "wall_seconds": round(statistics.fmean(t for _, t in results[(w, p)].values()), 2),
            }
        for p in PUBLISHED_POLICIES:
            if (w, p) in anchors:
                a = anchors[(w, p)]
                row[f"published {p}"] = {"unallocated": round(a.unallocated, 3), "band": a.band}
        rows.append(row)
    first = policies[0]
    below = {}  # against each reference: [workloads where the first policy is lower, workloads compared]
    for ref in [*(f"published {p}" for p in PUBLISHED_POLICIES), *policies[1:]]:
        compared = [r for r in rows if ref in r]
        won = sum(1 for r in compared if r[first]["unallocated"] < r[ref]["unallocated"])
        below[ref] = [won, len(compared)]
    for s in sorted(set(sets.values())):  # against the other policies of the run, per set
        for ref in policies[1:]:
            in_set = [r for r in rows if r["set"] == s]
            won = sum(1 for r in in_set if r[first]["unallocated"] < r[ref]["unallocated"])
            below[f"{ref} on {s}"] = [won, len(in_set)]
    return {"policies": policies, "rows": rows, "first_policy_below": below}


def _table(summary: dict[str, Any], policies: list[str]) -> str:
    published_heads = ["published FGD (band)", "published Best-fit (band)"]
    head = ["workload", "set", *(f"{p} (band)" for p in policies), *published_heads]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in summary["rows"]:
        cells = [r["workload"], r["set"]]
        for key in [*policies, "published fgd", "published best-fit"]:
            v = r.get(key)
            cells.append(f"{v['unallocated']:.2f} ({v['band']})" if v else "-")
        lines.append("| " + " | ".join(cells) + " |")
    first = policies[0]
    compared = summary["first_policy_below"].items()
    below = ", ".join(f"{ref} on {won} of {n}" for ref, (won, n) in compared if n)
    lines.append("")
    lines.append("unallocated GPU % at arrived = 100 % (band: allocation ratio min-max over seeds)")
    lines.append(f"{first} is below {below or 'nothing compared'}")
    walls = ", ".join(
        f"{p} {statistics.fmean(r[p]['wall_seconds'] for r in summary['rows']):.1f} s" for p in policies
    )
    lines.append(f"mean wall time per seed: {walls}")
    return "\n".join(lines)
