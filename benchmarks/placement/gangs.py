"""Gang benchmark: topology-aware vs topology-blind placement of multi-node gangs on a 1,024-GPU fleet.

Synthetic fleet: 128 nodes x 8 GPUs in 4 blocks x 4 racks x 8 nodes, NVLink domains of 4 nodes. Jobs arrive
(Poisson) and leave (exponential lifetimes) at an offered load near 90 %: single pods of 1, 2, 4 or 8 GPUs
and gangs of 2, 4 or 8 nodes x 8 GPUs. The engine places gangs with ``level=rack, required=False``; the
baseline places them all-or-nothing with per-pod best-fit anywhere (``level=zone``, the whole fleet is one
zone). Both see the same job sequence; the figure is the share of multi-node gangs that ended up inside
one rack, next to the time-averaged GPU allocation (so the comparison is at equal allocation).
"""

from __future__ import annotations

import argparse
import heapq
import statistics
from typing import Any

import numpy as np

from placement.engine.fleet import NodeSpec, PodRequest, Topology
from placement.engine.gang import GangRequest
from placement.engine.placer import Engine

BLOCKS, RACKS, NODES_PER_RACK, NVLINK_NODES, GPUS = 4, 4, 8, 4, 8


def fleet() -> list[NodeSpec]:
    """The synthetic 1,024-GPU fleet."""
    nodes = []
    for b in range(BLOCKS):
        for r in range(RACKS):
            for n in range(NODES_PER_RACK):
                topo = Topology("z0", f"b{b}", f"b{b}-r{r}", f"b{b}-r{r}-nv{n // NVLINK_NODES}")
                nodes.append(NodeSpec(f"b{b}-r{r}-n{n}", 128_000, 1_048_576, GPUS, "H100", topo))
    return nodes


def jobs(seed: int, count: int) -> list[tuple[float, float, int, int]]:
    """(arrival, lifetime, pods, GPUs per pod) per job; one third are multi-node gangs."""
    rng = np.random.default_rng(seed)
    out, t = [], 0.0
    for _ in range(count):
        t += float(rng.exponential(1.0))
        if rng.random() < 1 / 3:
            pods, gpus = int(rng.choice([2, 4, 8])), GPUS
        else:
            pods, gpus = 1, int(rng.choice([1, 2, 4, 8]))
        out.append((t, float(rng.exponential(95.0)), pods, gpus))
    return out


def simulate(seed: int, level: str, count: int) -> dict[str, Any]:
    """Replay the job sequence with gangs at ``level`` (rack-preferred or topology-blind)."""
    engine = Engine(fleet(), "best-fit", seed=seed)
    ends: list[tuple[float, int]] = []
    running: dict[int, list[str]] = {}
    gangs = in_rack = rejected = 0
    area, last, capacity = 0.0, 0.0, engine.fleet.total_gpus() * 1000
    for k, (t, life, pods, gpus) in enumerate(jobs(seed, count)):
        while ends and ends[0][0] <= t:
            _, done = heapq.heappop(ends)
            for name in running.pop(done):
                engine.release(name)
        area += engine.fleet.allocated_gpu_milli() * (t - last)
        last = t
        requests = tuple(PodRequest(f"j{k}-p{p}", 8000, 65_536, gpus, 1000) for p in range(pods))
        placed = engine.place_gang(GangRequest(f"j{k}", requests, level=level, required=False))
        if placed is None:
            rejected += 1
            continue
        running[k] = [p.pod for p in placed]
        heapq.heappush(ends, (t + life, k))
        if pods > 1:
            gangs += 1
            racks = {engine.fleet.specs[p.node_index].topology.rack for p in placed}
            in_rack += len(racks) == 1
    return {
        "gangs": gangs,
        "in_one_rack": in_rack,
        "share_in_rack": round(in_rack / max(gangs, 1), 4),
        "rejected_jobs": rejected,
        "mean_allocation": round(100 * area / last / capacity, 2),
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Topology-aware vs blind on the same job sequences."""
    rows = []
    for seed in args.seeds:
        aware, blind = simulate(seed, "rack", 3000), simulate(seed, "zone", 3000)
        rows.append({"seed": seed, "aware": aware, "blind": blind})
        if not args.json:
            a, b = aware["share_in_rack"], blind["share_in_rack"]
            print(
                f"seed {seed}: in one rack aware {a:.1%} vs blind {b:.1%}"
                f"  allocation {aware['mean_allocation']} % vs {blind['mean_allocation']} %"
                f"  rejected {aware['rejected_jobs']} vs {blind['rejected_jobs']}",
                flush=True,
            )
    summary = {
        "aware_share_in_rack": round(statistics.fmean(r["aware"]["share_in_rack"] for r in rows), 4),
        "blind_share_in_rack": round(statistics.fmean(r["blind"]["share_in_rack"] for r in rows), 4),
        "aware_allocation": round(statistics.fmean(r["aware"]["mean_allocation"] for r in rows), 2),
        "blind_allocation": round(statistics.fmean(r["blind"]["mean_allocation"] for r in rows), 2),
        "rows": rows,
    }
    if not args.json:
        print({k: v for k, v in summary.items() if k != "rows"})
    return summary
