"""Gang placement (all pods or none) inside one topology domain, and carving of dedicated node pools.

A gang asks for a topology level (``nvlink``, ``rack``, ``block``, ``zone``): ``required`` means every pod
must land inside one domain of that level, ``preferred`` means try that level first, then wider levels,
then anywhere. Among the domains that can take the whole gang, the engine picks the *tightest* one, the
one with the least free GPU capacity left, so that large free domains stay intact for large jobs.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from placement.engine.errors import EngineError, UnplaceablePod
from placement.engine.fleet import FREE, LEVELS, MILLI, Fleet, Placement, PodRequest

WIDER = {"node": "nvlink", "nvlink": "rack", "rack": "block", "block": "zone", "zone": None}


@dataclass(frozen=True)
class GangRequest:
    """Pods that run together; ``level`` is the topology level they must (or should) share."""

    name: str
    pods: tuple[PodRequest, ...]
    level: str = "rack"
    required: bool = True

    def __post_init__(self) -> None:
        if self.level not in LEVELS:
            raise EngineError(
                f"unknown topology level {self.level!r}; known: {', '.join(LEVELS)}", f"gang {self.name}"
            )
        if not self.pods:
            raise EngineError("a gang needs at least one pod", f"gang {self.name}")
        if len({(p.tenant, p.tier) for p in self.pods}) > 1:
            raise EngineError("all pods of a gang must belong to one tenant", f"gang {self.name}")


def domains(fleet: Fleet, level: str) -> dict[tuple[str, ...], np.ndarray]:
    """Node indices grouped by their domain at ``level``."""
    groups: dict[tuple[str, ...], list[int]] = defaultdict(list)
    for i, spec in enumerate(fleet.specs):
        groups[spec.topology.domain(level, spec.name)].append(i)
    return {k: np.array(v, dtype=np.int64) for k, v in groups.items()}


@dataclass
class _Trial:
    """Scratch copy of the free resources of some nodes, to test a gang without touching the fleet."""

    nodes: np.ndarray
    cpu: np.ndarray
    mem: np.ndarray
    gpu: np.ndarray

    @classmethod
    def of(cls, fleet: Fleet, nodes: np.ndarray) -> _Trial:
        return cls(
            nodes, fleet.cpu_free[nodes].copy(), fleet.mem_free[nodes].copy(), fleet.gpu_free[nodes].copy()
        )

    def fit(
        self, pod: PodRequest, node_ok: np.ndarray, gpu_ok: np.ndarray
    ) -> tuple[int, tuple[int, ...]] | None:
        """Best-fit one pod: the allowed node with the fewest free GPUs that still holds it."""
        usable = gpu_ok & (self.gpu >= pod.gpu_milli) if pod.num_gpu else np.zeros_like(gpu_ok)
        ok = node_ok & (self.cpu >= pod.cpu_milli) & (self.mem >= pod.memory_mib)
        ok &= usable.sum(axis=1) >= pod.num_gpu
        if not ok.any():
            return None
        free = np.maximum(self.gpu, 0).sum(axis=1)
        j = int(np.flatnonzero(ok)[np.argmin(free[ok])])
        gpus = tuple(int(g) for g in np.flatnonzero(usable[j])[: pod.num_gpu])
        self.cpu[j] -= pod.cpu_milli
        self.mem[j] -= pod.memory_mib
        self.gpu[j, list(gpus)] -= pod.gpu_milli
        return j, gpus

    def free_gpu_milli(self) -> int:
        return int(np.maximum(self.gpu, 0).sum())


Masks = list[tuple[np.ndarray, np.ndarray]]


def _masks(fleet: Fleet, gang: GangRequest, tid: int | None) -> Masks:
    """Per pod: allowed nodes and usable GPUs in the current state (health, tenancy, model)."""
    return [(fleet.node_mask(p, tid), fleet.usable_gpus(p, tid)) for p in gang.pods]


def _try_domain(
    fleet: Fleet, gang: GangRequest, nodes: np.ndarray, masks: Masks
) -> tuple[_Trial, list[tuple[int, tuple[int, ...]]]] | None:
    trial = _Trial.of(fleet, nodes)
    # Largest pods first: the usual first-fit-decreasing order for bin packing.
    order = sorted(range(len(gang.pods)), key=lambda k: -gang.pods[k].total_gpu_milli)
    picks: list[tuple[int, tuple[int, ...]] | None] = [None] * len(gang.pods)
    for k in order:
        pod = gang.pods[k]
        node_ok, gpu_ok = masks[k][0][nodes], masks[k][1][nodes]
        got = trial.fit(pod, node_ok, gpu_ok)
        if got is None:
            return None
        picks[k] = got
    return trial, [p for p in picks if p is not None]


def plan_gang(fleet: Fleet, gang: GangRequest) -> list[tuple[int, tuple[int, ...]]] | None:
    """Node index and GPU slots per pod (in gang order), or ``None`` if the gang does not fit now."""
    for pod in gang.pods:
        fleet.check_ever_fits(pod)
    tid = fleet.tenant(gang.pods[0].tenant, gang.pods[0].tier) if gang.pods[0].tenant else None
    masks = _masks(fleet, gang, tid)
    level: str | None = gang.level
    while level is not None:
        best = _tightest(fleet, gang, domains(fleet, level), masks)
        if best is not None or gang.required:
            return best
        level = WIDER[level]
    return _tightest(fleet, gang, {("*",): np.arange(len(fleet))}, masks)


def _tightest(
    fleet: Fleet, gang: GangRequest, groups: dict[tuple[str, ...], np.ndarray], masks: Masks
) -> list[tuple[int, tuple[int, ...]]] | None:
    best_key, best = None, None
    for _name, nodes in sorted(groups.items()):
        found = _try_domain(fleet, gang, nodes, masks)
        if found is None:
            continue
        trial, picks = found
        key = (trial.free_gpu_milli(), int(fleet.gpu_count[nodes].sum()))
        if best_key is None or key < best_key:
            best_key, best = key, [(int(trial.nodes[j]), gpus) for j, gpus in picks]
    return best


def place_gang(fleet: Fleet, gang: GangRequest) -> list[Placement] | None:
    """Place every pod of the gang or none of them."""
    plan = plan_gang(fleet, gang)
    if plan is None:
        return None
    pod0 = gang.pods[0]
    tid = fleet.tenant(pod0.tenant, pod0.tier) if pod0.tenant else None
    return [fleet.allocate(pod, i, gpus, tid) for pod, (i, gpus) in zip(gang.pods, plan, strict=True)]


def carve_pool(fleet: Fleet, tenant: str, gpus: int, dry_run: bool = False) -> list[str]:
    """Dedicate empty, healthy, shared nodes holding at least ``gpus`` GPUs to an isolated tenant.

    Picks the smallest domain, at the lowest topology level possible, that has enough such nodes, and inside
    it fills NVLink domains, then racks, one at a time, so the pool is compact. Returns the node names;
    ``dry_run`` only answers which nodes it would take.
    """
    if gpus <= 0:
        raise EngineError("a dedicated pool needs at least one GPU", f"tenant {tenant}")
    empty = (fleet.gpu_free == MILLI).sum(axis=1) == fleet.gpu_count
    empty &= fleet.cpu_free == fleet.cpu_cap
    eligible = empty & fleet.node_healthy & (fleet.node_owner == FREE) & (fleet.gpu_count > 0)
    for level in ("nvlink", "rack", "block", "zone"):
        chosen = _carve_at(fleet, level, eligible, gpus)
        if chosen:
            break
    else:
        chosen = _fill(fleet, np.flatnonzero(eligible), gpus)
    if not chosen:
        have = int(fleet.gpu_count[eligible].sum())
        raise UnplaceablePod(f"only {have} GPUs on empty shared nodes, {gpus} asked", f"pool for {tenant}")
    names = [fleet.names[i] for i in chosen]
    if not dry_run:
        fleet.dedicate(names, tenant)
    return names


def _carve_at(fleet: Fleet, level: str, eligible: np.ndarray, gpus: int) -> list[int]:
    fits = []
    for name, nodes in domains(fleet, level).items():
        ok = nodes[eligible[nodes]]
        total = int(fleet.gpu_count[ok].sum())
        if total >= gpus:
            fits.append((total, name, ok))
    if not fits:
        return []
    _, _, nodes = min(fits, key=lambda f: (f[0], f[1]))
    return _fill(fleet, nodes, gpus)


def _fill(fleet: Fleet, nodes: Sequence[int] | np.ndarray, gpus: int) -> list[int]:
    """Take nodes NVLink domain by NVLink domain (fullest domains first) until ``gpus`` are covered."""
    by_domain: dict[tuple[str, ...], list[int]] = defaultdict(list)
    for i in nodes:
        by_domain[fleet.specs[i].topology.domain("nvlink", fleet.names[i])].append(int(i))
    ordered = sorted(by_domain.items(), key=lambda kv: (-int(fleet.gpu_count[kv[1]].sum()), kv[0]))
    chosen: list[int] = []
    got = 0
    for _, members in ordered:
        for i in sorted(members, key=lambda i: (-int(fleet.gpu_count[i]), fleet.names[i])):
            if got >= gpus:
                return chosen
            chosen.append(i)
            got += int(fleet.gpu_count[i])
    return chosen if got >= gpus else []
