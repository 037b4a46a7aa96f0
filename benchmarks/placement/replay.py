"""Replay an openb pod list with departures: pods arrive at ``creation_time`` and leave at ``deletion_time``.

This is how the simulated fleet uses the engine: events sorted by time (a stable sort, as the authors'
simulator does, so a pod's creation precedes its deletion at equal times), one placement attempt per pod,
and a pod that did not fit is dropped. Reported: pods and GPU demand that could not be placed, the
time-weighted mean (over the arrival window) and the peak GPU allocation, and wall time.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from benchmarks.placement.trace import TracePod, read_nodes, read_pods
from placement.engine.errors import MalformedTraceRow
from placement.engine.fleet import MILLI
from placement.engine.placer import Engine


def events(pods: list[TracePod], stretch: float = 1.0) -> list[tuple[float, int, TracePod]]:
    """(time, kind, pod) with kind 0 = arrival, 1 = departure, in time order.

    ``stretch`` multiplies every lifetime (arrivals unchanged): the openb lists are light (about 1 % of the
    GPUs busy on average), so the load has to be raised to say anything about placement.
    """
    out: list[tuple[float, int, TracePod]] = []
    for p in pods:
        if p.created is None:
            raise MalformedTraceRow("the replay needs creation_time (this list has none)", p.request.name)
        out.append((p.created, 0, p))
        if p.deleted is not None:
            out.append((p.created + (p.deleted - p.created) * stretch, 1, p))
    return sorted(out, key=lambda e: e[0])


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Replay the trace once with the chosen policy."""
    nodes = read_nodes(args.nodes)
    pods = read_pods(args.pods)
    start = time.perf_counter()
    engine = Engine(nodes, args.policy, workload=[p.request for p in pods], seed=args.seed)
    capacity = engine.fleet.total_gpus() * MILLI
    placed: set[str] = set()
    failed = failed_milli = demand_milli = 0
    area = peak = 0.0
    last: float | None = None
    timeline = events(pods, args.stretch)
    end = max(t for t, kind, _ in timeline if kind == 0)  # average over the arrival window only
    for t, kind, p in timeline:
        allocated = engine.fleet.allocated_gpu_milli() / capacity
        area += allocated * (min(t, end) - last) if last is not None and last < end else 0.0
        last, peak = t, max(peak, allocated)
        if kind == 1:
            if p.request.name in placed:
                engine.release(p.request.name)
            continue
        demand_milli += p.request.total_gpu_milli
        if engine.try_place(p.request) is None:
            failed += 1
            failed_milli += p.request.total_gpu_milli
        else:
            placed.add(p.request.name)
    span = end - timeline[0][0]
    summary = {
        "workload": args.pods.stem,
        "policy": args.policy,
        "stretch": args.stretch,
        "pods": len(pods),
        "failed_pods": failed,
        "failed_gpu_demand_pct": round(100 * failed_milli / max(demand_milli, 1), 3),
        "mean_allocation_pct": round(100 * area / span, 3) if span else 0.0,
        "peak_allocation_pct": round(100 * peak, 3),
        "wall_seconds": round(time.perf_counter() - start, 2),
    }
    if not args.json:
        print(summary)
    return summary
