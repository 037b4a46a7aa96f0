"""The engine's picture of a fleet: nodes, GPUs, topology, health, tenancy, and what is allocated.

State lives in numpy arrays indexed by node (and GPU slot), so a policy can filter and score every node of a
1,000-node fleet in one vectorised step. Each node carries a version counter, bumped on every change, so
policies can cache per-node scores and recompute only the nodes that changed.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np

from placement.engine.errors import EngineError, UnknownGpuModel, UnplaceablePod
from placement.engine.mig import placement as mig_placement

MILLI = 1000
LEVELS = ("zone", "block", "rack", "nvlink", "node")
FREE = -1  # gpu_owner / node_owner: nobody
SHARED_TRUSTED = -2  # gpu_owner: several trusted tenants share this GPU


class Tier(StrEnum):
    """Trust tier of a tenant; decides who it may share hardware with."""

    STANDARD = "standard"
    TRUSTED = "trusted"
    ISOLATED = "isolated"


@dataclass(frozen=True)
class Topology:
    """Where a node sits: zone > block > rack > NVLink domain (the node itself is the last level)."""

    zone: str = ""
    block: str = ""
    rack: str = ""
    nvlink: str = ""

    def domain(self, level: str, node: str) -> tuple[str, ...]:
        """The key of the domain at ``level`` holding this node (a path, so racks of two blocks differ)."""
        path = (self.zone, self.block, self.rack, self.nvlink, node)
        return path[: LEVELS.index(level) + 1]


@dataclass(frozen=True)
class NodeSpec:
    """A node as inventoried: capacity, GPU model and count, and place in the topology."""

    name: str
    cpu_milli: int
    memory_mib: int
    gpus: int = 0
    model: str = ""
    topology: Topology = field(default_factory=Topology)


@dataclass(frozen=True)
class PodRequest:
    """What a pod asks for: CPU, memory, and either a fraction of one GPU or N whole GPUs.

    ``gpu_milli`` is per GPU: 1000 means whole GPUs; below 1000 is a share of one GPU (``num_gpu`` must be 1).
    An empty ``gpu_models`` accepts any model.
    """

    name: str
    cpu_milli: int
    memory_mib: int
    num_gpu: int = 0
    gpu_milli: int = 0
    gpu_models: frozenset[str] = frozenset()
    tenant: str = ""
    tier: Tier = Tier.TRUSTED
    mig_profile: str = ""  # e.g. "1g.10gb": one MIG instance instead of GPU milli

    def __post_init__(self) -> None:
        if self.cpu_milli < 0 or self.memory_mib < 0 or self.num_gpu < 0:
            raise EngineError("negative resource request", f"pod {self.name}")
        if self.mig_profile and (self.num_gpu or self.gpu_milli):
            raise EngineError("a MIG pod asks for one instance, not GPU milli", f"pod {self.name}")
        if not 0 <= self.gpu_milli <= MILLI:
            raise EngineError(f"gpu_milli {self.gpu_milli} outside 0..{MILLI}", f"pod {self.name}")
        if self.num_gpu > 1 and self.gpu_milli != MILLI:
            raise EngineError("a pod asking for several GPUs must ask for whole GPUs", f"pod {self.name}")
        if (self.num_gpu == 0) != (self.gpu_milli == 0):
            raise EngineError("num_gpu and gpu_milli must both be zero or both positive", f"pod {self.name}")

    @property
    def total_gpu_milli(self) -> int:
        """GPU milli asked in all: num_gpu x gpu_milli."""
        return self.num_gpu * self.gpu_milli

    @property
    def is_share(self) -> bool:
        """True for a fraction of one GPU."""
        return self.num_gpu == 1 and self.gpu_milli < MILLI


@dataclass(frozen=True)
class Placement:
    """Where a pod went: node and GPU slot indices on that node."""

    pod: str
    node: str
    node_index: int
    gpus: tuple[int, ...]
    gpu_milli: int
    mig_slot: int | None = None


class Fleet:
    """Mutable allocation state of a set of nodes (see the module docstring)."""

    def __init__(self, nodes: Sequence[NodeSpec]) -> None:
        if not nodes:
            raise EngineError("a fleet needs at least one node", "fleet")
        self.specs = list(nodes)
        self.names = [n.name for n in nodes]
        self.index = {name: i for i, name in enumerate(self.names)}
        if len(self.index) != len(self.names):
            raise EngineError("duplicate node name", "fleet")
        self.models = sorted({n.model for n in nodes if n.gpus})
        self._model_id = {m: i for i, m in enumerate(self.models)}
        self.model_idx = np.array([self._model_id.get(n.model, -1) for n in nodes], dtype=np.int64)
        self.gpu_count = np.array([n.gpus for n in nodes], dtype=np.int64)
        self.width = max(1, int(self.gpu_count.max()))
        self.cpu_cap = np.array([n.cpu_milli for n in nodes], dtype=np.int64)
        self.mem_cap = np.array([n.memory_mib for n in nodes], dtype=np.int64)
        self.cpu_free = self.cpu_cap.copy()
        self.mem_free = self.mem_cap.copy()
        slots = np.arange(self.width)[None, :] < self.gpu_count[:, None]
        self.gpu_exists = slots
        # Missing slots hold -1 so that no request (>= 1 milli) ever fits them.
        self.gpu_free = np.where(slots, MILLI, -1).astype(np.int64)
        self.gpu_healthy = slots.copy()
        self.node_healthy = np.ones(len(nodes), dtype=bool)
        self.node_owner = np.full(len(nodes), FREE, dtype=np.int64)
        self.gpu_owner = np.full((len(nodes), self.width), FREE, dtype=np.int64)
        self.version = np.zeros(len(nodes), dtype=np.int64)
        self.tenant_ids: dict[str, int] = {}
        self.tenant_tiers: list[Tier] = []
        self._occupants: dict[tuple[int, int], dict[int, int]] = {}
        self._placed: dict[str, tuple[Placement, PodRequest]] = {}
        # MIG: (node, gpu) -> one [profile, pod name or None] per configured instance.
        self.mig: dict[tuple[int, int], list[list[str | None]]] = {}

    # --- inventory -------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.names)

    def node(self, name: str) -> int:
        """Index of a node by name."""
        try:
            return self.index[name]
        except KeyError:
            raise EngineError(f"unknown node {name!r}", "fleet") from None

    def total_gpus(self) -> int:
        """GPUs that exist, healthy or not (the denominator of the FGD allocation ratio)."""
        return int(self.gpu_count.sum())

    def gpus_per_model(self) -> np.ndarray:
        """GPUs that exist per model, in the order of :attr:`models`."""
        has_gpus = self.model_idx >= 0
        counts = np.bincount(
            self.model_idx[has_gpus], weights=self.gpu_count[has_gpus], minlength=len(self.models)
        )
        return counts.astype(np.int64)

    def allocated_gpu_milli(self) -> int:
        """GPU milli currently allocated to pods."""
        return int(sum(p.gpu_milli * len(p.gpus) for p, _ in self._placed.values()))

    def placements(self) -> dict[str, Placement]:
        """Every live placement by pod name."""
        return {name: p for name, (p, _) in self._placed.items()}

    # --- health and ownership --------------------------------------------------------------------

    def quarantine_node(self, name: str, quarantined: bool = True) -> None:
        """Mark a node unusable (or usable again); running pods stay, nothing new lands."""
        i = self.node(name)
        self.node_healthy[i] = not quarantined
        self.version[i] += 1

    def quarantine_gpu(self, name: str, gpu: int, quarantined: bool = True) -> None:
        """Mark one GPU of a node unusable (or usable again)."""
        i = self.node(name)
        if not 0 <= gpu < self.gpu_count[i]:
            raise EngineError(f"node has no GPU {gpu}", f"node {name}")
        self.gpu_healthy[i, gpu] = not quarantined
        self.version[i] += 1

    def tenant(self, name: str, tier: Tier) -> int:
        """Id of a tenant, registering it on first sight; a tenant's tier may not change under it."""
        tid = self.tenant_ids.get(name)
        if tid is None:
            tid = len(self.tenant_tiers)
            self.tenant_ids[name] = tid
            self.tenant_tiers.append(Tier(tier))
        elif self.tenant_tiers[tid] != tier:
            raise EngineError(f"tenant {name!r} is {self.tenant_tiers[tid]}, not {tier}", "tenancy")
        return tid

    def dedicate(self, names: Iterable[str], tenant: str | None) -> None:
        """Dedicate nodes to an isolated tenant (``None`` returns them to the shared pool)."""
        owner = FREE if tenant is None else self.tenant(tenant, Tier.ISOLATED)
        for name in names:
            i = self.node(name)
            if owner != FREE and self._foreign_pods(i, owner):
                raise EngineError(f"node runs pods of other tenants; cannot dedicate to {tenant}", name)
            self.node_owner[i] = owner
            self.version[i] += 1

    def _foreign_pods(self, i: int, tid: int) -> bool:
        return any(
            p.node_index == i and r.tenant not in ("", self._tenant_name(tid))
            for p, r in self._placed.values()
        )

    def _tenant_name(self, tid: int) -> str:
        return next(name for name, t in self.tenant_ids.items() if t == tid)

    # --- filtering ---------------------------------------------------------------------------------

    def model_mask(self, pod: PodRequest) -> np.ndarray:
        """Nodes whose GPU model the pod accepts; raises if no model it names exists anywhere."""
        if not pod.num_gpu and not pod.mig_profile:
            return np.ones(len(self), dtype=bool)
        if not pod.gpu_models:
            return self.model_idx >= 0
        ids = [self._model_id[m] for m in pod.gpu_models if m in self._model_id]
        if not ids:
            raise UnknownGpuModel(
                f"no node has GPU model {'|'.join(sorted(pod.gpu_models))}", f"pod {pod.name}"
            )
        return np.isin(self.model_idx, ids)

    def usable_gpus(self, pod: PodRequest, tid: int | None) -> np.ndarray:
        """[node, slot] mask of GPUs this pod could take now: enough free milli, healthy, tenancy allows."""
        ok = (self.gpu_free >= pod.gpu_milli) & self.gpu_healthy
        if not self._occupants:
            return ok
        owner = self.gpu_owner
        allowed: np.ndarray
        if tid is None:  # a pod of no tenant (operator, trace replay) never joins a tenant's GPU
            allowed = owner == FREE
        else:
            allowed = (owner == FREE) | (owner == tid)
            if self.tenant_tiers[tid] == Tier.TRUSTED:
                trusted = np.array([t == Tier.TRUSTED for t in self.tenant_tiers])
                allowed |= (owner == SHARED_TRUSTED) | ((owner >= 0) & trusted[np.maximum(owner, 0)])
        usable: np.ndarray = ok & allowed
        return usable

    def node_mask(self, pod: PodRequest, tid: int | None) -> np.ndarray:
        """Nodes allowed for this pod by health, ownership, CPU, memory and GPU model (not GPU count)."""
        mask: np.ndarray = (
            self.node_healthy & (self.cpu_free >= pod.cpu_milli) & (self.mem_free >= pod.memory_mib)
        )
        mask &= self.model_mask(pod)  # a fresh array: narrowing it in place touches no field of the fleet
        if tid is None:
            if self.tenant_ids:
                mask &= self.node_owner == FREE
        elif self.tenant_tiers[tid] == Tier.ISOLATED:
            mask &= self.node_owner == tid
        else:
            mask &= self.node_owner == FREE
        return mask

    def candidates(self, pod: PodRequest, tid: int | None) -> tuple[np.ndarray, np.ndarray]:
        """Indices of nodes that fit the pod now, and the [candidate, slot] mask of GPUs it may use."""
        mask = self.node_mask(pod, tid)
        if not pod.num_gpu:
            idx = np.flatnonzero(mask)
            return idx, np.zeros((len(idx), self.width), dtype=bool)
        gpus = self.usable_gpus(pod, tid)
        mask &= gpus.sum(axis=1) >= pod.num_gpu
        idx = np.flatnonzero(mask)
        return idx, gpus[idx]

    def ever_fits(self, pod: PodRequest) -> bool:
        """Whether the pod fits at least one node of this fleet when that node is empty and healthy."""
        mask = (self.cpu_cap >= pod.cpu_milli) & (self.mem_cap >= pod.memory_mib)
        mask &= self.model_mask(pod) & (self.gpu_count >= pod.num_gpu)
        return bool(mask.any())

    def check_ever_fits(self, pod: PodRequest) -> None:
        """Raise :class:`UnplaceablePod` naming the pod if no node could ever host it."""
        if not self.ever_fits(pod):
            most = int(self.gpu_count.max())
            raise UnplaceablePod(
                f"no node can ever host {pod.num_gpu} GPU(s), {pod.cpu_milli} mCPU, {pod.memory_mib} MiB "
                f"(largest node has {most} GPUs)",
                f"pod {pod.name}",
            )

    # --- mutation ----------------------------------------------------------------------------------

    def allocate(self, pod: PodRequest, i: int, gpus: Sequence[int], tid: int | None = None) -> Placement:
        """Book a pod onto node ``i`` and the given GPU slots (the caller has checked that it fits)."""
        if pod.name in self._placed:
            raise EngineError("pod is already placed", f"pod {pod.name}")
        self.cpu_free[i] -= pod.cpu_milli
        self.mem_free[i] -= pod.memory_mib
        for g in gpus:
            self.gpu_free[i, g] -= pod.gpu_milli
            if tid is not None:
                self._occupy(i, g, tid, +1)
        self.version[i] += 1
        placement = Placement(pod.name, self.names[i], i, tuple(int(g) for g in gpus), pod.gpu_milli)
        self._placed[pod.name] = (placement, pod)
        return placement

    def release(self, pod_name: str) -> Placement:
        """Give back everything a placed pod held."""
        try:
            placement, pod = self._placed.pop(pod_name)
        except KeyError:
            raise EngineError("pod is not placed", f"pod {pod_name}") from None
        i = placement.node_index
        self.cpu_free[i] += pod.cpu_milli
        self.mem_free[i] += pod.memory_mib
        if placement.mig_slot is not None:
            self.mig[(i, placement.gpus[0])][placement.mig_slot][1] = None
            self.version[i] += 1
            return placement
        tid = self.tenant_ids.get(pod.tenant) if pod.tenant else None
        for g in placement.gpus:
            self.gpu_free[i, g] += pod.gpu_milli
            if tid is not None:
                self._occupy(i, g, tid, -1)
        self.version[i] += 1
        return placement

    # --- MIG ---------------------------------------------------------------------------------------

    def configure_mig(self, name: str, gpu: int, layout: Sequence[str]) -> None:
        """Put a GPU in MIG mode with this layout (empty layout: back to a plain GPU).

        Only a GPU with nothing running on it may be reconfigured; the layout must be valid for its model.
        """
        i = self.node(name)
        if not 0 <= gpu < self.gpu_count[i]:
            raise EngineError(f"node has no GPU {gpu}", f"node {name}")
        busy = (
            self.gpu_free[i, gpu] != MILLI
            if (i, gpu) not in self.mig
            else any(s[1] for s in self.mig[(i, gpu)])
        )
        if busy:
            raise EngineError(
                "GPU has running work; drain it before changing its MIG layout", f"{name}/{gpu}"
            )
        if not layout:
            self.mig.pop((i, gpu), None)
            self.gpu_free[i, gpu] = MILLI
        else:
            if mig_placement(self.specs[i].model, layout) is None:
                raise EngineError(
                    f"layout {list(layout)} is not valid on {self.specs[i].model}", f"{name}/{gpu}"
                )
            self.mig[(i, gpu)] = [[p, None] for p in layout]
            self.gpu_free[i, gpu] = -1  # a MIG GPU takes no milli or whole-GPU pods
        self.version[i] += 1

    def mig_slots(self, pod: PodRequest, tid: int | None) -> list[tuple[int, int, int]]:
        """Free instances of the pod's profile, as (node, gpu, slot), on nodes and GPUs it may use.

        MIG instances are isolated in hardware, so instances of one GPU may serve different tenants.
        """
        nodes = self.node_mask(pod, tid)
        return [
            (i, g, k)
            for (i, g), slots in sorted(self.mig.items())
            if nodes[i] and self.gpu_healthy[i, g]
            for k, (profile, holder) in enumerate(slots)
            if profile == pod.mig_profile and holder is None
        ]

    def allocate_mig(self, pod: PodRequest, i: int, g: int, k: int) -> Placement:
        """Book a MIG pod onto instance ``k`` of GPU ``g`` of node ``i``."""
        if pod.name in self._placed:
            raise EngineError("pod is already placed", f"pod {pod.name}")
        self.mig[(i, g)][k][1] = pod.name
        self.cpu_free[i] -= pod.cpu_milli
        self.mem_free[i] -= pod.memory_mib
        self.version[i] += 1
        placement = Placement(pod.name, self.names[i], i, (g,), 0, k)
        self._placed[pod.name] = (placement, pod)
        return placement

    def _occupy(self, i: int, g: int, tid: int, delta: int) -> None:
        """Track which tenants hold a GPU, so the sharing rule can be checked by array lookups."""
        holders = self._occupants.setdefault((i, g), {})
        holders[tid] = holders.get(tid, 0) + delta
        if holders[tid] <= 0:
            del holders[tid]
        if not holders:
            del self._occupants[(i, g)]
            self.gpu_owner[i, g] = FREE
        elif len(holders) == 1:
            self.gpu_owner[i, g] = next(iter(holders))
        else:
            self.gpu_owner[i, g] = SHARED_TRUSTED

    def gpu_tenants(self, name: str, gpu: int) -> set[str]:
        """Names of the tenants holding a GPU (for tests and the what-if API)."""
        holders = self._occupants.get((self.node(name), gpu), {})
        return {self._tenant_name(t) for t in holders}
