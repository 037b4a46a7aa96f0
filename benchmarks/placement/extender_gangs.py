"""Gangs through the scheduler extender on the openb trace: reservation vs pod by pod vs Kueue TAS's rule.

Fleet: the 1,213 nodes of ``openb_node_list_gpu_node.csv``. The trace has no topology, so one is laid out
from the file's order (which groups nodes by model): racks of ``--rack-nodes`` (8) consecutive nodes, blocks
of ``--block-racks`` (8) consecutive racks, one zone, no NVLink domain wider than a node.

Pods: the FGD protocol's arrival order for a seed (`benchmarks.placement.openb.arrival_order`, ``--tune``
1.3 by default), one arrival every ``--tick`` seconds (1 s), pods never leave. Gangs: walking the arrivals
in order, every multi-GPU pod (``num_gpu > 1``) joins the open gang of its GPU count and GPU-model
constraint; gang sizes are 2, 3, 4, 2, 3, 4, … in the order gangs open, a gang closes when full, and one
left unfilled at the end keeps the pods it got (a single pod is then no gang). A gang's pods keep their
arrival positions (other pods arrive between them; with ``--together`` they all arrive, back to back, at
the first one's position, as a Job's pods are created) and all ask for the first member's CPU and memory.

Each mode replays the same arrivals through an in-process :class:`Extender` (``filter`` with every node
name, then ``prioritize`` with those that passed, the best score "bound" and reported to the extender as
the feed would):

- ``reserve``: the pods carry Kueue pod-group labels (no topology ask: preferred rack); the first one
  reserves the whole gang with the engine's gang placement, the rest follow; ``--timeout`` (300 s) drops
  what an unfinished gang still holds.
- ``pod-by-pod``: the same pods without gang labels: each placed on its own by the engine's policy.
- ``kueue-tas``: as ``reserve``, but the gang's nodes are chosen by :func:`tas_plan`, Kueue's Topology
  Aware Scheduling rule as its design describes it (kubernetes-sigs/kueue,
  ``keps/2724-topology-aware-scheduling/README.md``, "Computing the assignment", the ``BestFit`` algorithm
  of the default profile for required and preferred asks; user docs:
  https://kueue.sigs.k8s.io/docs/concepts/topology_aware_scheduling/): the podset goes to one domain of
  the lowest level that can hold it whole, starting at the asked level (required: that level only;
  preferred: then each wider level, and past the top spread over the whole fleet); among the domains that
  fit, the one with the least free capacity ("BestFit"); inside it, the child domains of each level down
  to the nodes are taken in decreasing free capacity, the last one swapped for the tightest child that
  still holds the remainder. Capacity is counted in pods of the gang's shape that fit each node now.

Scored per mode (:func:`score`): the share of gangs placed whole inside one rack and inside one block;
GPU-seconds held while a gang is not whole (reserved slots not yet bound, plus the GPUs of its bound pods),
until it is whole or the replay ends; gangs that never completed; and the GPU allocation at the end.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from benchmarks.placement.openb import arrival_order
from benchmarks.placement.trace import read_nodes, read_pods
from benchmarks.placement.via_extender import v1_pod
from placement.engine.fleet import LEVELS, MILLI, Fleet, NodeSpec, PodRequest, Topology
from placement.engine.gang import GangRequest, domains, plan_gang
from placement.extender.gangs import KUEUE_COUNT, KUEUE_GROUP
from placement.extender.pods import ObservedPod
from placement.extender.state import Extender, GangPlanner, Slot

MODES = ("reserve", "pod-by-pod", "kueue-tas")
SIZES = (2, 3, 4)


def with_topology(nodes: Sequence[NodeSpec], rack_nodes: int = 8, block_racks: int = 8) -> list[NodeSpec]:
    """The nodes in file order, racks of ``rack_nodes`` and blocks of ``block_racks`` racks."""
    out = []
    for k, n in enumerate(nodes):
        rack = k // rack_nodes
        block = rack // block_racks
        out.append(replace(n, topology=Topology("z0", f"b{block}", f"b{block}-r{rack}", "")))
    return out


def group_gangs(order: Sequence[PodRequest], sizes: Sequence[int] = SIZES) -> dict[str, tuple[str, int]]:
    """Pod name -> (gang name, gang size) for the multi-GPU pods of an arrival order (module docstring)."""
    open_gangs: dict[tuple[int, frozenset[str]], tuple[list[str], int]] = {}
    gangs: list[list[str]] = []
    for pod in order:
        if pod.num_gpu < 2:
            continue
        shape = (pod.num_gpu, pod.gpu_models)
        if shape not in open_gangs:
            open_gangs[shape] = ([], sizes[len(gangs) % len(sizes)])
            gangs.append(open_gangs[shape][0])
        members, size = open_gangs[shape]
        members.append(pod.name)
        if len(members) == size:
            del open_gangs[shape]
    out: dict[str, tuple[str, int]] = {}
    for k, members in enumerate(gangs):
        if len(members) > 1:
            out.update({name: (f"gang-{k}", len(members)) for name in members})
    return out


def gather(order: Sequence[PodRequest], gangs: dict[str, tuple[str, int]]) -> list[PodRequest]:
    """The arrivals with each gang's pods moved up to arrive together, at its first pod's position."""
    members: dict[str, list[PodRequest]] = defaultdict(list)
    for pod in order:
        if pod.name in gangs:
            members[gangs[pod.name][0]].append(pod)
    out: list[PodRequest] = []
    for pod in order:
        if pod.name not in gangs:
            out.append(pod)
        elif (gang := members.pop(gangs[pod.name][0], None)) is not None:
            out.extend(gang)
    return out


def tas_plan(fleet: Fleet, gang: GangRequest) -> list[Slot] | None:
    """Kueue TAS's choice of nodes for a gang of identical pods (module docstring), or None."""
    pod, count = gang.pods[0], len(gang.pods)
    fleet.check_ever_fits(pod)
    tid = fleet.tenant(pod.tenant, pod.tier) if pod.tenant else None
    usable = fleet.usable_gpus(pod, tid) & fleet.gpu_exists
    cap = capacity(fleet, pod, fleet.node_mask(pod, tid), usable)
    start = LEVELS.index(gang.level)
    chosen: np.ndarray | None = None
    for li in range(start, -1, -1):
        fitting = [
            (int(cap[nodes].sum()), key, nodes)
            for key, nodes in domains(fleet, LEVELS[li]).items()
            if cap[nodes].sum() >= count
        ]
        if fitting:
            chosen = min(fitting, key=lambda f: (f[0], f[1]))[2]
            below = li + 1
            break
        if gang.required:
            return None
    if chosen is None:  # preferred, and no single domain holds it: the whole fleet
        if cap.sum() < count:
            return None
        chosen, below = np.arange(len(fleet)), 0
    per_node = _descend(fleet, chosen, cap, count, below)
    slots: list[Slot] = []
    for i, n in per_node:
        free = list(np.flatnonzero(usable[i]))
        for _ in range(n):
            slots.append((i, tuple(int(g) for g in free[: pod.num_gpu])))
            free = free[pod.num_gpu :]
    return slots


def capacity(fleet: Fleet, pod: PodRequest, node_ok: np.ndarray, usable: np.ndarray) -> np.ndarray:
    """Pods of this shape that fit each node now (0 where the node is not allowed)."""
    big = np.full(len(fleet), 1 << 30, dtype=np.int64)
    by_cpu = fleet.cpu_free // pod.cpu_milli if pod.cpu_milli else big
    by_mem = fleet.mem_free // pod.memory_mib if pod.memory_mib else big
    by_gpu = usable.sum(axis=1) // pod.num_gpu if pod.num_gpu else big
    fits: np.ndarray = np.where(node_ok, np.maximum(np.minimum(np.minimum(by_cpu, by_mem), by_gpu), 0), 0)
    return fits


def _descend(fleet: Fleet, nodes: np.ndarray, cap: np.ndarray, count: int, li: int) -> list[tuple[int, int]]:
    """(node, pods) inside ``nodes``: children by decreasing capacity, the last one the tightest that fits."""
    children: list[tuple[tuple[str, ...], np.ndarray]]
    if li >= LEVELS.index("node"):
        children = [((fleet.names[i],), np.array([i])) for i in nodes]
    else:
        groups: dict[tuple[str, ...], list[int]] = defaultdict(list)
        for i in nodes:
            groups[fleet.specs[i].topology.domain(LEVELS[li], fleet.names[i])].append(int(i))
        children = [(k, np.array(v)) for k, v in groups.items()]
    ranked = sorted(((int(cap[m].sum()), k, m) for k, m in children), key=lambda c: (-c[0], c[1]))
    taken: list[tuple[np.ndarray, int]] = []
    left = count
    for pos, (c, _k, members) in enumerate(ranked):
        if c <= 0:
            break
        if c >= left:
            tight = min((r for r in ranked[pos:] if r[0] >= left), key=lambda r: (r[0], r[1]))
            taken.append((tight[2], left))
            left = 0
            break
        taken.append((members, c))
        left -= c
    if li >= LEVELS.index("node"):
        return [(int(m[0]), n) for m, n in taken]
    return [pair for m, n in taken for pair in _descend(fleet, m, cap, n, li + 1)]


@dataclass
class GangRecord:
    """What happened to one gang in one replay."""

    size: int
    hosts: list[str] = field(default_factory=list)  # where its pods were bound
    whole_at: float | None = None


def score(records: dict[str, GangRecord], specs: dict[str, NodeSpec]) -> dict[str, Any]:
    """Shares of gangs whole inside one rack and one block, and gangs that never completed."""
    total = len(records)
    whole = [r for r in records.values() if r.whole_at is not None]

    def inside(level: str) -> int:
        return sum(len({specs[h].topology.domain(level, h) for h in r.hosts}) == 1 for r in whole)

    return {
        "gangs": total,
        "whole": len(whole),
        "share_in_one_rack": round(inside("rack") / max(total, 1), 4),
        "share_in_one_block": round(inside("block") / max(total, 1), 4),
        "not_completed": total - len(whole),
    }


def replay(
    nodes: Sequence[NodeSpec],
    order: Sequence[PodRequest],
    gangs: dict[str, tuple[str, int]],
    mode: str,
    policy: str,
    tick: float,
    timeout: float,
) -> dict[str, Any]:
    """One replay of the arrivals in ``mode``; the scores and the idle GPU-seconds."""
    now = [0.0]
    planner: GangPlanner = tas_plan if mode == "kueue-tas" else plan_gang
    ext = Extender(
        nodes,
        policy,
        workload=sorted(order, key=lambda p: p.name),
        assume_seconds=1e12,
        clock=lambda: now[0],
        gang_seconds=timeout,
        gang_planner=planner,
    )
    names = [n.name for n in nodes]
    specs = {n.name: n for n in nodes}
    first: dict[str, PodRequest] = {}
    records: dict[str, GangRecord] = {}
    held_bound = 0  # GPUs of bound pods of gangs not yet whole
    idle = 0.0
    failed = 0
    start = time.perf_counter()
    for pod in order:
        now[0] += tick
        idle += tick * (held_bound + ext.reserved_gpus())
        gang = gangs.get(pod.name)
        v1 = v1_pod(pod)
        if gang is not None:
            name, size = gang
            pod = replace(first.setdefault(name, pod), name=pod.name)
            v1 = v1_pod(pod)
            record = records.setdefault(name, GangRecord(size))
            if mode != "pod-by-pod":
                v1["metadata"]["labels"] = {KUEUE_GROUP: name}
                v1["metadata"]["annotations"] = {KUEUE_COUNT: str(size)}
        passed = ext.filter({"Pod": v1, "NodeNames": names})["NodeNames"]
        host = None
        if passed:
            scores = ext.prioritize({"Pod": v1, "NodeNames": passed})
            host = max(scores, key=lambda h: h["Score"])["Host"]
            ext.observe([ObservedPod(replace(pod, name=f"openb/{pod.name}"), host)], complete=False)
        if host is None:
            failed += 1
        elif gang is not None:
            record.hosts.append(host)
            held_bound += pod.num_gpu
            if len(record.hosts) == record.size:
                record.whole_at = now[0]
                held_bound -= record.size * pod.num_gpu
    result = score(records, specs)
    capacity_milli = ext.fleet.total_gpus() * MILLI
    result.update(
        {
            "mode": mode,
            "idle_gpu_seconds": round(idle),
            "reservations_timed_out": ext.gangs_timed_out,
            "failed_pods": failed,
            "allocation_pct_at_end": round(100 * ext.fleet.allocated_gpu_milli() / capacity_milli, 2),
            "wall_seconds": round(time.perf_counter() - start, 1),
        }
    )
    return result


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Every mode on the same arrivals, per seed, side by side."""
    nodes = with_topology(read_nodes(args.nodes), args.rack_nodes, args.block_racks)
    pods = [p.request for p in read_pods(args.pods)]
    capacity_milli = sum(n.gpus for n in nodes) * MILLI
    rows = []
    for seed in args.seeds:
        order = arrival_order(pods, capacity_milli, seed, args.tune)
        gangs = group_gangs(order)
        if args.together:
            order = gather(order, gangs)
        for mode in args.modes:
            row = {"seed": seed, **replay(nodes, order, gangs, mode, args.policy, args.tick, args.timeout)}
            rows.append(row)
            if not args.json:
                print(_line(row), flush=True)
    summary: dict[str, Any] = {"rows": rows, "modes": {}}
    for mode in args.modes:
        mine = [r for r in rows if r["mode"] == mode]
        keys = (
            "share_in_one_rack",
            "share_in_one_block",
            "idle_gpu_seconds",
            "not_completed",
            "reservations_timed_out",
            "gangs",
        )
        summary["modes"][mode] = {k: round(statistics.fmean(r[k] for r in mine), 4) for k in keys}
        if not args.json:
            print(f"mean over {len(mine)} seeds: {mode}: {summary['modes'][mode]}")
    return summary


def _line(row: dict[str, Any]) -> str:
    return (
        f"seed {row['seed']} {row['mode']:>10}: {row['gangs']} gangs, "
        f"in one rack {row['share_in_one_rack']:.1%}, "
        f"in one block {row['share_in_one_block']:.1%}, not completed {row['not_completed']}, "
        f"idle {row['idle_gpu_seconds']} GPU-s, timed out {row['reservations_timed_out']}, "
        f"failed pods {row['failed_pods']}, "
        f"allocation {row['allocation_pct_at_end']} %, {row['wall_seconds']} s"
    )
