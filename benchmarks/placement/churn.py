"""Cost of change of MIG layouts: the partition planner against re-planning from scratch, over a day of quota
changes on a 1,000-GPU fleet (``python -m benchmarks.placement mig-churn --seeds 42-44``).

The fleet: 125 nodes × 8 H200. The replay: 40 tenants with MIG guarantees over the four H200 profiles; every
15 minutes (96 steps) a few tenants raise or lower one guarantee, the aggregate staying within the fleet. At
each step a random 30 % of the nodes run pods (busy).

- *incremental* is what gpucloud runs (`placement.engine.partition_plans.plan_partitions`): current layouts
  kept where useful, busy nodes never changed; every change it asks for is taken as done by the next step;
- *from scratch* re-plans every step with `plan_mig` on blank GPUs, as a controller that recomputes the whole
  layout would, and changes every GPU whose layout differs, busy or not.

Figures per policy: GPUs reconfigured over the day (and of those, GPUs on busy nodes, i.e. running pods
disrupted), nodes relabelled, and averaged over the steps, in compute slices (of 7 per GPU): stranded
(instances no guarantee asks for), short (guarantees no instance holds) and fragments (left in no instance on
GPUs with MIG on, which neither a slice of the demanded profiles nor a whole GPU can use).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from placement.engine.mig import MigGpu, plan_mig
from placement.engine.partition_plans import PartitionNode, plan_partitions

MODEL = "h200-141gb"
PROFILES = ("1g.18gb", "2g.35gb", "3g.71gb", "7g.141gb")
SLICES = {"1g.18gb": 1, "2g.35gb": 2, "3g.71gb": 3, "7g.141gb": 7}
NODES, GPUS_PER_NODE, TENANTS, STEPS = 125, 8, 40, 96
Layouts = tuple[tuple[str, ...], ...]


@dataclass
class Tally:
    reconfigured: int = 0
    reconfigured_busy: int = 0
    nodes_changed: int = 0
    stranded: list[int] = field(default_factory=list)
    short: list[int] = field(default_factory=list)
    fragments: list[int] = field(default_factory=list)
    seconds: float = 0.0


def replay(rng: np.random.Generator) -> list[dict[str, int]]:
    """Aggregate MIG demand (instances per class) after each step of a day of quota changes."""
    quotas = {(t, p): int(rng.integers(0, 8)) for t in range(TENANTS) for p in PROFILES if rng.random() < 0.4}
    budget = NODES * GPUS_PER_NODE * 7 * 0.6  # guarantees stay within 60 % of the fleet's compute slices
    days = []
    for _ in range(STEPS):
        for _ in range(int(rng.integers(1, 5))):
            key = (int(rng.integers(0, TENANTS)), PROFILES[int(rng.integers(0, len(PROFILES)))])
            quotas[key] = max(0, quotas.get(key, 0) + int(rng.integers(-8, 9)))
            while sum(SLICES[p] * n for (_, p), n in quotas.items()) > budget:
                quotas[key] -= 1
        demand: Counter[str] = Counter()
        for (_, p), n in quotas.items():
            demand[f"{MODEL}.mig-{p}"] += n
        days.append(dict(demand))
    return days


def _stranded_short(layouts: dict[str, Layouts], demand: dict[str, int]) -> tuple[int, int, int]:
    """Compute slices of instances no guarantee asks for, of guarantees no instance holds, and left in no
    instance on GPUs with MIG on (fragments neither a slice nor a whole GPU can use)."""
    have: Counter[str] = Counter()
    fragments = 0
    for node in layouts.values():
        for layout in node:
            have.update(f"{MODEL}.mig-{p}" for p in layout)
            if layout:
                fragments += 7 - sum(SLICES[p] for p in layout)
    want = Counter(demand)
    stranded = sum(SLICES[k.split(".mig-")[1]] * n for k, n in (have - want).items())
    short = sum(SLICES[k.split(".mig-")[1]] * n for k, n in (want - have).items())
    return stranded, short, fragments


def _count(before: dict[str, Layouts], after: dict[str, Layouts], busy: set[str], tally: Tally) -> None:
    for name, old in before.items():
        new = after[name]
        changed = [i for i in range(GPUS_PER_NODE) if sorted(old[i]) != sorted(new[i])]
        tally.reconfigured += len(changed)
        tally.nodes_changed += bool(changed)
        if name in busy:
            tally.reconfigured_busy += len(changed)


def incremental(days: list[dict[str, int]], busy_steps: list[set[str]]) -> Tally:
    tally = Tally()
    state: dict[str, Layouts] = {f"n{i:03d}": ((),) * GPUS_PER_NODE for i in range(NODES)}
    for demand, busy in zip(days, busy_steps, strict=True):
        nodes = [
            PartitionNode(name, MODEL, GPUS_PER_NODE, True, layouts, busy=name in busy)
            for name, layouts in state.items()
        ]
        started = time.perf_counter()
        plan = plan_partitions(nodes, demand, {}, max_changes=NODES)
        tally.seconds += time.perf_counter() - started
        after = dict(state)
        for name in plan.apply_now:
            after[name] = plan.targets[name].layouts
        _count(state, after, busy, tally)
        state = after
        stranded, short, fragments = _stranded_short(state, demand)
        tally.stranded.append(stranded)
        tally.short.append(short)
        tally.fragments.append(fragments)
    return tally


def from_scratch(days: list[dict[str, int]], busy_steps: list[set[str]]) -> Tally:
    tally = Tally()
    names = [f"n{i:03d}" for i in range(NODES)]
    state: dict[str, Layouts] = dict.fromkeys(names, ((),) * GPUS_PER_NODE)
    blank = [MigGpu(f"{n}#{g}", MODEL) for n in names for g in range(GPUS_PER_NODE)]
    for demand, busy in zip(days, busy_steps, strict=True):
        started = time.perf_counter()
        plan = plan_mig(demand, blank)
        tally.seconds += time.perf_counter() - started
        after = {n: tuple(plan.layouts[f"{n}#{g}"] for g in range(GPUS_PER_NODE)) for n in names}
        _count(state, after, busy, tally)
        state = after
        stranded, short, fragments = _stranded_short(state, demand)
        tally.stranded.append(stranded)
        tally.short.append(short)
        tally.fragments.append(fragments)
    return tally


def measure(seeds: list[int]) -> dict[str, dict[str, float]]:
    """Mean figures per policy over the seeds."""
    out: dict[str, dict[str, list[float]]] = {"incremental": {}, "from scratch": {}}
    for seed in seeds:
        rng = np.random.default_rng(seed)
        days = replay(rng)
        names = [f"n{i:03d}" for i in range(NODES)]
        busy_steps = [{n for n in names if rng.random() < 0.3} for _ in days]
        for label, policy in (("incremental", incremental), ("from scratch", from_scratch)):
            tally = policy(days, busy_steps)
            figures = {
                "gpus_reconfigured": tally.reconfigured,
                "busy_gpus_reconfigured": tally.reconfigured_busy,
                "nodes_relabelled": tally.nodes_changed,
                "stranded_slices_mean": statistics.fmean(tally.stranded),
                "short_slices_mean": statistics.fmean(tally.short),
                "fragment_slices_mean": statistics.fmean(tally.fragments),
                "plan_ms_mean": 1000 * tally.seconds / len(days),
            }
            for key, value in figures.items():
                out[label].setdefault(key, []).append(value)
    return {label: {k: statistics.fmean(v) for k, v in figs.items()} for label, figs in out.items()}


def run(args: argparse.Namespace) -> dict[str, dict[str, float]]:
    """`python -m benchmarks.placement mig-churn`: the table (unless --json); returns the figures."""
    result = measure(args.seeds)
    if args.json:
        return result
    print(
        f"MIG cost of change: {NODES * GPUS_PER_NODE} H200 GPUs, {STEPS} quota-change steps, "
        f"seeds {args.seeds}"
    )
    keys = list(result["incremental"])
    print("| policy | " + " | ".join(keys) + " |")
    print("|---|" + "---|" * len(keys))
    for label, figs in result.items():
        print(f"| {label} | " + " | ".join(f"{figs[k]:.1f}" for k in keys) + " |")
    print(
        "anchor: re-planning from scratch (what a controller that recomputes the layout does) reconfigures "
        "busy GPUs; the incremental planner must reconfigure none"
    )
    return result
