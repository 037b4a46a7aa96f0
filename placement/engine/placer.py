"""The engine's entry point: a fleet plus a policy, placing pods one at a time and answering what-ifs."""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from placement.engine.errors import UnknownMigProfile
from placement.engine.fleet import Fleet, NodeSpec, Placement, PodRequest
from placement.engine.gang import GangRequest, carve_pool, place_gang
from placement.engine.mig import MODELS, profile
from placement.engine.policies import Policy, make_policy


@dataclass(frozen=True)
class WhatIf:
    """Answer to "would these pods fit now?": placements found, and the pods that would not fit."""

    fits: bool
    placements: tuple[Placement, ...]
    unplaced: tuple[str, ...]


class Engine:
    """Places pods on a :class:`Fleet` with a named policy, honouring health and tenancy rules."""

    def __init__(
        self,
        nodes: Sequence[NodeSpec] | Fleet,
        policy: str | Policy = "default",
        workload: Sequence[PodRequest] = (),
        seed: int = 0,
    ) -> None:
        self.fleet = nodes if isinstance(nodes, Fleet) else Fleet(nodes)
        self.policy = make_policy(policy, seed) if isinstance(policy, str) else policy
        sample = workload or _uniform_sample(self.fleet)
        self.policy.prepare(self.fleet, sample)

    def _tid(self, pod: PodRequest) -> int | None:
        return self.fleet.tenant(pod.tenant, pod.tier) if pod.tenant else None

    def try_place(self, pod: PodRequest) -> Placement | None:
        """Place the pod if some node fits it now; ``None`` if none does (no error: it may fit later)."""
        tid = self._tid(pod)
        if pod.mig_profile:
            return self._place_mig(pod, tid)
        cand, gpu_ok = self.fleet.candidates(pod, tid)
        if not len(cand):
            return None
        choice = self.policy.choose(self.fleet, pod, cand, gpu_ok, -1 if tid is None else tid)
        return self.fleet.allocate(pod, int(cand[choice.position]), choice.gpus, tid)

    def _place_mig(self, pod: PodRequest, tid: int | None) -> Placement | None:
        """Pack MIG pods: the GPU with the fewest free instances left, lowest index first."""
        slots = self.fleet.mig_slots(pod, tid)
        if not slots:
            return None
        free = Counter((i, g) for i, g, _ in slots)
        i, g, k = min(slots, key=lambda s: (free[(s[0], s[1])], s))
        return self.fleet.allocate_mig(pod, i, g, k)

    def place(self, pod: PodRequest) -> Placement | None:
        """Like :meth:`try_place`, but raise a clear error for a pod no node could ever host.

        :class:`UnplaceablePod` (too big for any node), :class:`UnknownGpuModel` (no node has a model it
        names), :class:`UnknownMigProfile` (none of its models offers the MIG profile).
        """
        self.fleet.check_ever_fits(pod)
        if pod.mig_profile:
            _check_mig_profile(self.fleet, pod)
        return self.try_place(pod)

    def release(self, pod_name: str) -> Placement:
        """Free what a pod held."""
        return self.fleet.release(pod_name)

    def place_gang(self, gang: GangRequest) -> list[Placement] | None:
        """Place all pods of a gang inside one topology domain, or none; ``None`` means not now."""
        return place_gang(self.fleet, gang)

    def carve_pool(self, tenant: str, gpus: int, dry_run: bool = False) -> list[str]:
        """Dedicate a topology-compact set of empty nodes (>= ``gpus`` GPUs) to an isolated tenant."""
        return carve_pool(self.fleet, tenant, gpus, dry_run)

    def what_if(self, pods: Sequence[PodRequest] = (), gangs: Sequence[GangRequest] = ()) -> WhatIf:
        """Would these pods and gangs all fit now, and where? The live fleet is not changed."""
        scratch = copy.deepcopy(self)
        placed: list[Placement] = []
        unplaced: list[str] = []
        for gang in gangs:
            got = scratch.place_gang(gang)
            placed.extend(got or [])
            unplaced.extend([] if got else [gang.name])
        for pod in pods:
            p = scratch.place(pod)
            placed.extend([p] if p else [])
            unplaced.extend([] if p else [pod.name])
        return WhatIf(not unplaced, tuple(placed), tuple(unplaced))


def _check_mig_profile(fleet: Fleet, pod: PodRequest) -> None:
    models = sorted(pod.gpu_models) or fleet.models
    offering = [m for m in models if pod.mig_profile in MODELS.get(m, {})]
    if not offering:
        if len(models) == 1:
            profile(models[0], pod.mig_profile, f"pod {pod.name}")  # raises the precise error
        raise UnknownMigProfile(
            f"no GPU model here ({', '.join(models)}) offers {pod.mig_profile}", f"pod {pod.name}"
        )


def _uniform_sample(fleet: Fleet) -> list[PodRequest]:
    """A stand-in workload when none is known: whole 1, 2, 4, 8-GPU pods and halves, equally often.

    Fragmentation-based policies need a typical-pod distribution; the product passes its recent pods instead.
    """
    shapes = [(1, 500), (1, 1000), (2, 1000), (4, 1000), (8, 1000)]
    return [PodRequest(f"sample-{n}-{m}", 4000, 16_384, n, m) for n, m in shapes]
