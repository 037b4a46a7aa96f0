"""Which gang a v1.Pod belongs to, as the scheduler extender reads it from the pod's labels and annotations.

A gang is the set of pods that must run together: the extender reserves the whole gang's nodes at the first
pod it is asked about (`placement.extender.state.Extender`). Each integration names its pods' group its own
way; the keys below are the upstream ones:

- **Kueue pod groups** (plain pods): label ``kueue.x-k8s.io/pod-group-name`` and annotation
  ``kueue.x-k8s.io/pod-group-total-count`` on every member (kueue.sigs.k8s.io/docs/tasks/run/plain_pods/,
  "Running a group of Pods to be admitted together").
- **JobSet**: labels ``jobset.sigs.k8s.io/jobset-name``, ``jobset.sigs.k8s.io/replicatedjob-name`` and
  ``jobset.sigs.k8s.io/replicatedjob-replicas`` (kubernetes-sigs/jobset, docs "JobSet labels": set on the
  Jobs and their pods, and mirrored as annotations). A replicated job is one gang; its size is the replicas
  times the pods per Job, which a pod does not carry: ``gpucloud.io/gang-size`` gives it (gpucloud sets it
  when it renders a JobSet), else one pod per Job is assumed (parallelism 1, the common distributed-training
  shape, and what Kueue TAS reads as ``SubGroupCount`` from ``replicatedjob-replicas``).
- **LeaderWorkerSet**: label ``leaderworkerset.sigs.k8s.io/name``, the group's
  ``leaderworkerset.sigs.k8s.io/group-key`` (else ``group-index``) label and the
  ``leaderworkerset.sigs.k8s.io/size`` annotation (kubernetes-sigs/lws, site "Labels, Annotations and
  Environment Variables"): one group (leader and workers) is one gang.
- **KAI Scheduler**: annotation ``pod-group-name`` (NVIDIA/KAI-Scheduler, ``PodGroupAnnotationForPod``,
  set by its pod grouper); the size is the PodGroup's ``minMember`` when the extender knows it
  (:func:`gang_of`'s ``min_members``), else ``gpucloud.io/gang-size``; without either it is no gang.

A topology ask comes from Kueue TAS's PodSet annotations ``kueue.x-k8s.io/podset-required-topology`` and
``kueue.x-k8s.io/podset-preferred-topology`` (kueue.sigs.k8s.io/docs/concepts/topology_aware_scheduling/),
whose value is a node label key: it maps to the engine's level through the host cluster's topology keys
(:data:`TOPOLOGY_KEYS`, the labels ``clusters.node_sync.topology`` reads: zone, ``…topology-block`` or
``…/block``, ``…topology-rack`` or ``…/rack``, ``nvidia.com/gpu.clique``, ``kubernetes.io/hostname``). No
ask: preferred rack. Bad values raise :class:`BadRequest` (answered 400).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from placement.engine.fleet import LEVELS, Topology
from placement.extender.pods import BadRequest

KUEUE_GROUP = "kueue.x-k8s.io/pod-group-name"
KUEUE_COUNT = "kueue.x-k8s.io/pod-group-total-count"
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
JOBSET_REPLICATED_JOB = "jobset.sigs.k8s.io/replicatedjob-name"
JOBSET_REPLICAS = "jobset.sigs.k8s.io/replicatedjob-replicas"
LWS_NAME = "leaderworkerset.sigs.k8s.io/name"
LWS_GROUP_KEY = "leaderworkerset.sigs.k8s.io/group-key"
LWS_GROUP_INDEX = "leaderworkerset.sigs.k8s.io/group-index"
LWS_SIZE = "leaderworkerset.sigs.k8s.io/size"
KAI_GROUP = "pod-group-name"
GANG_SIZE = "gpucloud.io/gang-size"
TAS_REQUIRED = "kueue.x-k8s.io/podset-required-topology"
TAS_PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
MAX_GANG = 4096

TOPOLOGY_KEYS = {
    "topology.kubernetes.io/zone": "zone",
    "nvidia.com/gpu.clique": "nvlink",
    "kubernetes.io/hostname": "node",
}


@dataclass(frozen=True)
class Gang:
    """A pod's gang: ``key`` is unique in the host cluster (namespace, integration, name)."""

    key: str
    size: int
    level: str = "rack"
    required: bool = False
    source: str = ""


def level_of(label_key: str, keys: Mapping[str, str] = TOPOLOGY_KEYS) -> str:
    """The engine's level for a node label key, as ``clusters.node_sync.topology`` reads the labels."""
    if label_key in keys:
        return keys[label_key]
    if "topology-block" in label_key or label_key.endswith("/block"):
        return "block"
    if "topology-rack" in label_key or label_key.endswith("/rack"):
        return "rack"
    raise BadRequest(
        f"topology {label_key!r} is not a level of this host cluster "
        f"(known: {', '.join(sorted(keys))}, …/block, …/rack)",
        "Pod",
    )


def node_topology(labels: Mapping[str, Any], keys: Mapping[str, str] = TOPOLOGY_KEYS) -> Topology:
    """A node's zone, block, rack and NVLink domain from its labels, by the keys :func:`level_of` reads."""
    found: dict[str, str] = {}
    for key, value in labels.items():
        try:
            level = level_of(str(key), keys)
        except BadRequest:
            continue
        found.setdefault(level, str(value))
    return Topology(
        found.get("zone", ""), found.get("block", ""), found.get("rack", ""), found.get("nvlink", "")
    )


def _count(value: Any, field: str, where: str) -> int:
    text = str(value).strip()
    if not text.isdigit() or not 1 <= int(text) <= MAX_GANG:
        raise BadRequest(f"{field} must be a whole number from 1 to {MAX_GANG}, not {value!r}", where)
    return int(text)


def _strings(value: Any) -> dict[str, str]:
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, Mapping) else {}


def gang_of(
    pod: Mapping[str, Any],
    keys: Mapping[str, str] = TOPOLOGY_KEYS,
    min_members: Mapping[str, int] | None = None,
) -> Gang | None:
    """The pod's gang, or None (a pod on its own, or a gang of one).

    ``min_members``: KAI PodGroups' ``minMember`` by ``namespace/name``, when the extender knows them.
    """
    meta = pod.get("metadata") if isinstance(pod, Mapping) else None
    if not isinstance(meta, Mapping):
        return None
    labels, annotations = _strings(meta.get("labels")), _strings(meta.get("annotations"))
    both = {**annotations, **labels}
    namespace = str(meta.get("namespace") or "default")
    where = f"{namespace}/{meta.get('name')}"
    found: tuple[str, int | None, str] | None = None
    override = _count(annotations[GANG_SIZE], GANG_SIZE, where) if GANG_SIZE in annotations else None
    if KUEUE_GROUP in labels:
        if KUEUE_COUNT not in annotations:
            raise BadRequest(f"a pod of a Kueue pod group needs the {KUEUE_COUNT} annotation", where)
        found = ("kueue", _count(annotations[KUEUE_COUNT], KUEUE_COUNT, where), labels[KUEUE_GROUP])
    elif JOBSET_NAME in both and JOBSET_REPLICATED_JOB in both:
        replicas = _count(both.get(JOBSET_REPLICAS, "1"), JOBSET_REPLICAS, where)
        found = ("jobset", override or replicas, f"{both[JOBSET_NAME]}/{both[JOBSET_REPLICATED_JOB]}")
    elif LWS_NAME in labels:
        group = labels.get(LWS_GROUP_KEY) or labels.get(LWS_GROUP_INDEX)
        if group is None or LWS_SIZE not in annotations:
            return None  # not yet stamped by the LWS webhook: placed on its own
        found = ("lws", _count(annotations[LWS_SIZE], LWS_SIZE, where), f"{labels[LWS_NAME]}/{group}")
    elif KAI_GROUP in annotations:
        known = (min_members or {}).get(f"{namespace}/{annotations[KAI_GROUP]}")
        found = ("kai", known or override, annotations[KAI_GROUP])
    if found is None:
        return None
    source, size, name = found
    if size is None or size < 2:
        return None
    level, required = "rack", False
    if TAS_REQUIRED in annotations:
        level, required = level_of(annotations[TAS_REQUIRED], keys), True
    elif TAS_PREFERRED in annotations:
        level = level_of(annotations[TAS_PREFERRED], keys)
    if level not in LEVELS:
        raise BadRequest(f"topology level {level!r} is not one of {', '.join(LEVELS)}", where)
    return Gang(f"{namespace}/{source}/{name}", size, level, required, source)
