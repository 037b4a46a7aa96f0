"""KAI Scheduler's `PodGroup` objects (scheduling.run.ai/v2alpha2) that wait, as a tenant's queue shows them.

KAI groups a workload's pods into a PodGroup in the pods' namespace and marks each pod with the annotation
`pod-group-name` (pkg/common/constants in NVIDIA/KAI-Scheduler). It has no position API: the queue order
is priority, then creation, as KAI's own queue orders jobs of one queue.

Whether a group waits is read from its pods, not its status: KAI writes an `UnschedulableOnNodePool`
scheduling condition when it cannot place the group and leaves it there once the group runs, and its
`resourcesStatus.allocated` (kept by KAI's pod-group controller) may lag the binding. So a group waits while
fewer than `minMember` of its pods are bound to a node and not all of them have finished; the driver lists
the pods only in namespaces holding a group with nothing allocated (`unallocated`), so a pass over running
groups costs no pod list.

Not a driver: the kubernetes driver imports it, it imports none of them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from decimal import Decimal

from clusters.drivers.kueue_workloads import created, gpu_class_of, pod_gpus
from clusters.drivers.quantities import MAX_QUANTITY, count, quantity
from clusters.spec import TenantSpec, WorkloadObservation
from gpucloud.kube.meta import Manifest

__all__ = ["POD_GROUP_ANNOTATION", "pod_group_of", "priorities", "unallocated"]

POD_GROUP_ANNOTATION = "pod-group-name"
UNSCHEDULABLE = "UnschedulableOnNodePool"
FINISHED = ("Succeeded", "Failed")
# Kubernetes' built-in classes: the API server creates them; these values hold when a list lacks them.
SYSTEM_PRIORITIES = {"system-cluster-critical": 2000000000, "system-node-critical": 2000001000}


def unallocated(pod_group: Manifest) -> bool:
    """Nothing allocated to it by KAI's pod-group controller: it may wait (its pods decide)."""
    status = (pod_group.get("status") or {}).get("resourcesStatus") or {}
    held = {**(status.get("allocated") or {}), **(status.get("allocatedNonPreemptible") or {})}
    return not any(quantity(str(v), Decimal(1)) > 0 for v in held.values())


def priorities(priority_classes: Iterable[Manifest]) -> dict[str, int]:
    """PriorityClass name -> value, with "" for the cluster's global default (0 when it has none)."""
    values = dict(SYSTEM_PRIORITIES)
    values[""] = 0
    for pc in priority_classes:
        value = int(pc.get("value") or 0)
        values[pc["metadata"]["name"]] = value
        if pc.get("globalDefault"):
            values[""] = value
    return values


def _message(pod_group: Manifest) -> str:
    """KAI's words for why it waits: the latest `UnschedulableOnNodePool` scheduling condition (its message,
    or its reasons' messages), else an `Unschedulable` condition's."""
    status = pod_group.get("status") or {}
    latest: Manifest | None = None
    for c in status.get("schedulingConditions") or []:
        live = c.get("type") == UNSCHEDULABLE and c.get("status", "True") == "True"
        if live and (latest is None or _transition(c) >= _transition(latest)):
            latest = c
    if latest is not None:
        reasons = [str(r.get("message") or r.get("reason") or "") for r in latest.get("reasons") or []]
        return str(latest.get("message") or "; ".join(r for r in reasons if r)).strip()
    for c in status.get("conditions") or []:
        if c.get("reason") == "Unschedulable" or c.get("type") == "Unschedulable":
            return str(c.get("message") or "")
    return ""


def _transition(condition: Manifest) -> int:
    try:
        return int(condition.get("transitionID") or 0)
    except ValueError:
        return 0


def _waits(min_member: int, pods: list[Manifest]) -> bool:
    phases = [(p.get("status") or {}).get("phase") for p in pods]
    if pods and all(phase in FINISHED for phase in phases):
        return False
    bound = sum(1 for p in pods if (p.get("spec") or {}).get("nodeName"))
    return bound < min_member


def pod_group_of(
    pod_group: Manifest, pods: list[Manifest], tenant: TenantSpec, priority_of: Mapping[str, int]
) -> WorkloadObservation | None:
    """The group as a waiting workload of the tenant, or None when it does not wait.

    `pods` are the group's pods (those annotated `pod-group-name: <its name>`). Its GPU units are its pods'
    requests, scaled up to `minMember` pods when not all of them exist yet.
    """
    spec = pod_group.get("spec") or {}
    min_member = max(count(str(spec.get("minMember") or 1)), 1)
    if not pods or not _waits(min_member, pods):
        return None
    gpus: dict[str, int] = {}
    for pod in pods:
        for name, units in pod_gpus(pod.get("spec") or {}).items():
            gpus[name] = gpus.get(name, 0) + units
    total = sum(gpus.values())
    if len(pods) < min_member:  # the rest are not created yet: as many again as the average pod asks
        total = -(-total * min_member // len(pods))
    return WorkloadObservation(
        name=pod_group["metadata"]["name"],
        queue=str(spec.get("queue") or ""),
        state="pending",
        gpus=min(total, MAX_QUANTITY),
        gpu_class=gpu_class_of(gpus, tenant),
        created_at=created(pod_group),
        pods=min(max(min_member, len(pods)), MAX_QUANTITY),
        priority=priority_of.get(str(spec.get("priorityClassName") or ""), priority_of.get("", 0)),
        message=_message(pod_group),
    )
