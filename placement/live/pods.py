"""A v1.Pod as the live view keeps it: where it runs, which GPU devices it holds, and its times. Pure.

What a pod asks of GPUs is read as the extender reads it (`placement.extender.pods.pod_request`: whole GPUs
from ``nvidia.com/gpu``, one MIG instance from ``nvidia.com/mig-<profile>``, a HAMi fraction from
``nvidia.com/gpucores``, a share from the ``gpucloud.io/gpu-milli`` annotation), plus a time-sliced share
from ``nvidia.com/gpu.shared``, so the extender's feed and the live view read a pod one way. A DRA pod asks
for none of these: it names ResourceClaims (`claim_names`), and what they were allocated is read in
`placement.live.claims`.

Times, all to the second as the API server gives them:

- created: ``metadata.creationTimestamp``;
- scheduled: the ``PodScheduled`` condition's ``lastTransitionTime`` once it is ``True``;
- started (holds its GPUs from): ``status.startTime``, when the kubelet took the pod and its device plugin
  allocated the devices; before that the scheduled time, else when the view first saw it bound;
- finished (gave them back at): the latest ``finishedAt`` of its terminated containers once the pod is
  ``Succeeded`` or ``Failed`` or deleted; without one, when the view saw it end (a deletion seen only as
  its absence from a later list ends it at that list, so a lost watch never drops time).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from placement.engine.errors import EngineError
from placement.extender.pods import BadRequest, pod_request, quantity

SHARED = "nvidia.com/gpu.shared"  # a time-sliced replica of one GPU (the `<model>.shared` classes)
GPU_INDEX = "gpucloud.io/gpu-index"  # annotation a device plugin may set: "0,1"
DONE = ("Succeeded", "Failed")
PHASES = ("Pending", "Running", "Succeeded", "Failed")


@dataclass(frozen=True)
class Devices:
    """What a pod holds of GPUs: ``gpus`` whole GPUs (or one shared GPU), at ``milli`` of 1000 each, or one
    MIG instance of ``mig_profile``; ``shared`` when it is a time-sliced replica."""

    gpus: int = 0
    milli: int = 1000
    mig_profile: str = ""
    shared: bool = False
    indexes: tuple[int, ...] = ()  # GPU indexes on the node when the device plugin's annotation names them

    @property
    def any(self) -> bool:
        return bool(self.gpus or self.mig_profile)


@dataclass(frozen=True)
class PodFacts:
    """One pod as the host cluster reports it (from a list or a watch event)."""

    uid: str
    namespace: str
    name: str
    node: str  # "" while not bound
    phase: str
    devices: Devices
    created: datetime | None
    scheduled: datetime | None
    started: datetime | None
    finished: datetime | None
    claims: tuple[str, ...] = ()  # the DRA ResourceClaims it uses (placement.live.claims)

    @property
    def done(self) -> bool:
        return self.phase in DONE


def timestamp(value: Any) -> datetime | None:
    """An RFC 3339 time of the API server (``2026-12-05T00:37:16Z``), or None when absent or unreadable."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


def devices(pod: Mapping[str, Any]) -> Devices:
    """The GPU devices a pod asks for (see the module docstring); raises BadRequest for a pod it cannot
    read."""
    try:
        request = pod_request(pod)
    except EngineError as e:
        raise BadRequest(e.what, e.where) from None
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    index = str(annotations.get(GPU_INDEX, "")) if isinstance(annotations, Mapping) else ""
    indexes = tuple(int(g) for g in index.split(",") if g.strip().isdigit())
    if request.mig_profile:
        return Devices(mig_profile=request.mig_profile, indexes=indexes[:1])
    if request.num_gpu:
        return Devices(request.num_gpu, request.gpu_milli, indexes=indexes)
    shares = _shared(pod)
    return Devices(1, 0, shared=True, indexes=indexes[:1]) if shares else Devices(0)


def _shared(pod: Mapping[str, Any]) -> int:
    """Replicas of ``nvidia.com/gpu.shared`` its containers ask for (0 if none)."""
    total = Decimal(0)
    for container in (pod.get("spec") or {}).get("containers") or []:
        resources = (container or {}).get("resources") or {}
        for part in ("requests", "limits"):
            value = (resources.get(part) or {}).get(SHARED)
            if value is not None:
                total += quantity(value, SHARED)
                break
    return int(total)


def facts(pod: Mapping[str, Any], *, seen: datetime, deleted: bool = False) -> PodFacts:
    """The pod's facts; ``seen`` is when the view saw this version (a deleted pod ends by then at the
    latest). Raises BadRequest for a pod whose GPU requests cannot be read."""
    meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
    phase = str(status.get("phase") or "Pending")
    node = str(spec.get("nodeName") or "")
    scheduled = _condition_time(status, "PodScheduled") if node else None
    started = timestamp(status.get("startTime")) or scheduled
    finished = None
    if phase in DONE or deleted:
        finished = _finished(status) or seen
        if phase not in DONE:
            phase = "Failed" if deleted else phase
    return PodFacts(
        uid=str(meta.get("uid") or ""),
        namespace=str(meta.get("namespace") or "default"),
        name=str(meta.get("name") or ""),
        node=node,
        phase=phase if phase in PHASES else "Pending",
        devices=devices(pod),
        created=timestamp(meta.get("creationTimestamp")),
        scheduled=scheduled,
        started=started,
        finished=finished,
        claims=claim_names(pod),
    )


def claim_names(pod: Mapping[str, Any]) -> tuple[str, ...]:
    """The names of the ResourceClaims a pod uses (a template's claim once the controller made it)."""
    made = {
        str(s.get("name")): str(s.get("resourceClaimName") or "")
        for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []
        if isinstance(s, Mapping)
    }
    names = []
    for entry in (pod.get("spec") or {}).get("resourceClaims") or []:
        if not isinstance(entry, Mapping):
            continue
        name = entry.get("resourceClaimName") or made.get(str(entry.get("name")), "")
        if name:
            names.append(str(name))
    return tuple(names)


def _condition_time(status: Mapping[str, Any], kind: str) -> datetime | None:
    for condition in status.get("conditions") or []:
        if (condition or {}).get("type") == kind and condition.get("status") == "True":
            return timestamp(condition.get("lastTransitionTime"))
    return None


def _finished(status: Mapping[str, Any]) -> datetime | None:
    """The latest finishedAt of the pod's terminated containers (None if none reported one)."""
    statuses = [*(status.get("containerStatuses") or []), *(status.get("initContainerStatuses") or [])]
    ends = [
        timestamp(((s or {}).get("state") or {}).get("terminated", {}).get("finishedAt")) for s in statuses
    ]
    known = [e for e in ends if e is not None]
    return max(known) if known else None
