"""How wrong the estimated start has been: ``python -m benchmarks.estimate [--pods CSV] [--nodes CSV]``.

A day of the openb trace replayed on a simulated fleet through the placement engine, as the simulated fleet
runs (`simulator/workloads.py`): pods arrive at their ``creation_time`` and hold their GPUs for the trace's
lifetime (``deletion_time - creation_time``); a pod that does not fit waits in one queue, BestEffortFIFO
(after every arrival and every end the queue is tried in order; a later pod that fits starts before an earlier
one that does not). When a pod has to wait, its start is estimated at that moment with
`placement.queue_estimate.replay`, exactly as the product does: a scratch copy of the fleet, the running pods
ending at their known ends, the queue ahead of it in order. When it then starts, the difference is its error.
What the estimate cannot know is the pods that arrive later and jump ahead: that alone makes it wrong.

The openb lists are light (about 1 % of the 6,212 GPUs busy on average), so nothing would ever wait on the
whole fleet: the fleet is the first ``--fleet-nodes`` GPU nodes of the node list, and the day is the 24 hours
of the trace with the most arrivals (``--start`` to choose another). Reported: estimates made, median and p90
absolute error (minutes), over the pods that waited, beside their median wait (the pods that started on
arrival were estimated "now" and were right, counted apart), and wall time.
"""

from __future__ import annotations

import argparse
import bisect
import heapq
import json
import math
import os
import platform
import statistics
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpucloud.settings")
django.setup()

from benchmarks.placement.__main__ import DEFAULT_NODES, DEFAULT_PODS  # noqa: E402  (after django.setup())
from benchmarks.placement.trace import TracePod, read_nodes, read_pods  # noqa: E402
from fleet.models import HostCluster  # noqa: E402
from placement.engine import Engine, EngineError  # noqa: E402
from placement.queue_estimate import Queued, replay  # noqa: E402
from placement.service import FleetModel  # noqa: E402

DAY = 86_400
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)  # trace seconds are offsets from this


def busiest_day(pods: list[TracePod]) -> int:
    """The start (a creation time) of the 24 hours holding the most arrivals."""
    times = sorted(p.created for p in pods if p.created is not None)
    best, start = 0, times[0]
    for i, t in enumerate(times):
        n = bisect.bisect_left(times, t + DAY) - i
        if n > best:
            best, start = n, t
    return start


def at(seconds: float) -> datetime:
    return EPOCH + timedelta(seconds=seconds)


def run(args: argparse.Namespace) -> dict[str, Any]:
    nodes = read_nodes(args.nodes)[: args.fleet_nodes]
    trace = [p for p in read_pods(args.pods) if p.created is not None and p.deleted is not None]
    trace = [p for p in trace if p.request.num_gpu]  # GPU pods: the others never wait for a GPU
    begin = args.start if args.start is not None else busiest_day(trace)
    day = sorted((p for p in trace if begin <= (p.created or 0) < begin + DAY), key=lambda p: p.created or 0)
    clock = time.perf_counter()
    model = FleetModel(HostCluster(name="openb"), Engine(nodes, workload=[p.request for p in day]), {}, {})
    check = model.engine.fleet
    day = [p for p in day if _ever_fits(check, p)]
    lifetime = {p.request.name: args.stretch * ((p.deleted or 0) - (p.created or 0)) for p in day}
    ends: list[tuple[float, str]] = []  # (end, pod) of running pods
    waiting: list[TracePod] = []
    estimates: dict[str, float | None] = {}
    errors: list[float] = []
    waits: list[float] = []  # minutes from arrival to start, of the pods that waited
    unestimated = started_on_arrival = 0
    arrivals = [(float(p.created or 0), p) for p in day]
    i = 0
    while i < len(arrivals) or waiting:
        next_end = ends[0][0] if ends else None
        next_arrival = arrivals[i][0] if i < len(arrivals) else None
        if next_end is None and next_arrival is None:
            break  # waiting pods that can never start on this fleet
        now = min(t for t in (next_end, next_arrival) if t is not None)
        while ends and ends[0][0] <= now:
            model.release(heapq.heappop(ends)[1])
        new = []
        while i < len(arrivals) and arrivals[i][0] <= now:
            new.append(arrivals[i][1])
            i += 1
        still = []
        for pod in [*waiting, *new]:
            if model.place(pod.request) is None:
                still.append(pod)
                continue
            heapq.heappush(ends, (now + lifetime[pod.request.name], pod.request.name))
            if pod in new:
                started_on_arrival += 1
            else:
                guess = estimates.pop(pod.request.name)
                waits.append((now - (pod.created or 0)) / 60)
                if guess is None:
                    unestimated += 1
                else:
                    errors.append(abs(now - guess) / 60)
        waiting = still
        for pod in new:
            if pod in waiting:
                estimates[pod.request.name] = _estimate(model, ends, waiting, pod, now, lifetime)
    wall = time.perf_counter() - clock
    errors.sort()
    summary = {
        "window_start_s": begin,
        "fleet_nodes": len(nodes),
        "fleet_gpus": int(check.total_gpus()),
        "pods": len(day),
        "started_on_arrival": started_on_arrival,
        "estimates": len(errors),
        "not_estimated": unestimated,
        "median_error_min": round(statistics.median(errors), 1) if errors else None,
        "p90_error_min": round(errors[math.ceil(0.9 * len(errors)) - 1], 1)
        if errors
        else None,  # nearest rank
        "stretch": args.stretch,
        "median_wait_min": round(statistics.median(waits), 1) if waits else None,
        "wall_seconds": round(wall, 1),
        "machine": f"{platform.machine()} {os.cpu_count()} cpu, Python {platform.python_version()}",
    }
    print(json.dumps(summary, indent=2))
    return summary


def _ever_fits(fleet: Any, pod: TracePod) -> bool:
    try:
        fleet.check_ever_fits(pod.request)
    except EngineError:  # a pod no node of the cut fleet can host is left out
        return False
    return True


def _estimate(
    model: FleetModel,
    ends: list[tuple[float, str]],
    waiting: list[TracePod],
    pod: TracePod,
    now: float,
    lifetime: dict[str, float],
) -> float | None:
    """The estimated start of `pod`, queued behind `waiting` (in order), by the product's replay."""
    ahead = waiting[: waiting.index(pod) + 1]
    queue = [Queued(p.request.name, (p.request,), timedelta(seconds=lifetime[p.request.name])) for p in ahead]
    running = [(at(t), name, "", 0) for t, name in ends]
    start = replay(model, running, queue, at(now), horizon=timedelta(days=30), stop=pod.request.name)
    moment = start[pod.request.name].at
    return None if moment is None else (moment - EPOCH).total_seconds()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=Path, default=DEFAULT_NODES)
    parser.add_argument("--pods", type=Path, default=DEFAULT_PODS)
    parser.add_argument("--fleet-nodes", type=int, default=8, help="the first N GPU nodes of the node list")
    parser.add_argument("--stretch", type=float, default=1.0, help="multiply every lifetime (more load)")
    parser.add_argument(
        "--start", type=int, default=None, help="trace second the day starts (default: busiest)"
    )
    run(parser.parse_args())


if __name__ == "__main__":
    main()
