"""The engine's entry point: a fleet plus a policy, placing pods one at a time and answering what-ifs."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass

from scheduling.engine.fleet import Fleet, NodeSpec, Placement, PodRequest
from scheduling.engine.policies import Policy, make_policy


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
        cand, gpu_ok = self.fleet.candidates(pod, tid)
        if not len(cand):
            return None
        choice = self.policy.choose(self.fleet, pod, cand, gpu_ok, -1 if tid is None else tid)
        return self.fleet.allocate(pod, int(cand[choice.position]), choice.gpus, tid)

    def place(self, pod: PodRequest) -> Placement | None:
        """Like :meth:`try_place`, but raise :class:`UnplaceablePod` for a pod no node could ever host."""
        self.fleet.check_ever_fits(pod)
        return self.try_place(pod)

    def release(self, pod_name: str) -> Placement:
        """Free what a pod held."""
        return self.fleet.release(pod_name)

    def what_if(self, pods: Sequence[PodRequest]) -> WhatIf:
        """Would these pods all fit now, and where? The live fleet is not changed."""
        scratch = copy.deepcopy(self)
        placed, unplaced = [], []
        for pod in pods:
            scratch.fleet.check_ever_fits(pod)
            p = scratch.try_place(pod)
            if p is None:
                unplaced.append(pod.name)
            else:
                placed.append(p)
        return WhatIf(not unplaced, tuple(placed), tuple(unplaced))


def _uniform_sample(fleet: Fleet) -> list[PodRequest]:
    """A stand-in workload when none is known: whole 1, 2, 4, 8-GPU pods and halves, equally often.

    Fragmentation-based policies need a typical-pod distribution; the product passes its recent pods instead.
    """
    shapes = [(1, 500), (1, 1000), (2, 1000), (4, 1000), (8, 1000)]
    return [PodRequest(f"sample-{n}-{m}", 4000, 16_384, n, m) for n, m in shapes]
