"""Kueue's `Workload` objects as a tenant's workloads page shows them (`WorkloadObservation`).

The kubernetes driver lists them once per pass across the tenants' namespaces (they are Kueue's, not
gpucloud's, so no label selects them) and reads each with `workload_of`; a pending one's place in its
LocalQueue comes from Kueue's visibility API (`positions`, read by the driver only for tenants with
pending workloads).

Not a driver: the kubernetes driver imports it, it imports none of them.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Literal

from clusters.drivers.quantities import MAX_QUANTITY, count, quantity
from clusters.render.kueue import flavor_name
from clusters.spec import TenantSpec, WorkloadObservation
from gpucloud.kube.meta import Manifest

__all__ = ["created", "gpu_class_of", "pod_gpus", "positions", "workload_of"]

GPU_RESOURCE_PREFIX = "nvidia.com/"


def _condition(obj: Manifest, kind: str) -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions)


def _workload_state(obj: Manifest) -> Literal["admitted", "pending", "finished"]:
    """Finished once `Finished=True`; admitted while `Admitted=True` (quota reserved and checks passed)."""
    if _condition(obj, "Finished"):
        return "finished"
    return "admitted" if _condition(obj, "Admitted") else "pending"


def pod_gpus(pod_spec: Manifest) -> dict[str, int]:
    """GPU units per resource name one pod asks for: its containers' requests (or limits)."""
    asked: dict[str, int] = {}
    for container in pod_spec.get("containers") or []:
        resources = container.get("resources") or {}
        wanted = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
        for name, value in wanted.items():
            if name.startswith(GPU_RESOURCE_PREFIX):
                asked[name] = asked.get(name, 0) + quantity(value, Decimal(1))
    return asked


def _pod_set_gpus(pod_set: Manifest) -> dict[str, int]:
    """GPU units per resource name one pod set asks for: its count × each pod's requests (or limits)."""
    asked = pod_gpus(((pod_set.get("template") or {}).get("spec")) or {})
    return {name: units * _pods(pod_set) for name, units in asked.items()}


def _pods(pod_set: Manifest) -> int:
    return count(str(pod_set.get("count", 1)))


def gpu_class_of(gpus: dict[str, int], tenant: TenantSpec) -> str:
    """The tenant's class with the workload's GPU resource when exactly one has it, else the resource
    name itself ("" when it asks for no GPUs)."""
    if not gpus:
        return ""
    resource = sorted(gpus)[0]
    by_resource = [q.gpu_class for q in tenant.quotas if q.resource_name == resource]
    return by_resource[0] if len(by_resource) == 1 else resource


def _waiting_message(obj: Manifest) -> str:
    """Kueue's own words for why it waits: `QuotaReserved=False` (no quota yet), else `Admitted=False`
    (quota reserved, admission checks pending)."""
    conditions = (obj.get("status") or {}).get("conditions") or []
    for kind in ("QuotaReserved", "Admitted"):
        for c in conditions:
            if c.get("type") == kind and c.get("status") == "False" and c.get("message"):
                return str(c["message"])
    return ""


def _priority(spec: Manifest) -> int:
    try:
        return int(spec.get("priority") or 0)
    except (TypeError, ValueError):
        return 0


def created(obj: Manifest) -> datetime | None:
    text = obj.get("metadata", {}).get("creationTimestamp")
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")) if text else None
    except ValueError:
        return None


def workload_of(obj: Manifest, tenant: TenantSpec) -> WorkloadObservation:
    """A Kueue `Workload` (v1beta2) as the tenant's workloads page shows it.

    The class is that of the flavor Kueue admitted it to; before admission, the tenant's class with the
    workload's GPU resource when exactly one has it, else the resource name itself.
    """
    spec = obj.get("spec") or {}
    gpus: dict[str, int] = {}
    for pod_set in spec.get("podSets") or []:
        for name, units in _pod_set_gpus(pod_set).items():
            gpus[name] = gpus.get(name, 0) + units
    classes_by_flavor = {flavor_name(q.gpu_class): q.gpu_class for q in tenant.quotas}
    gpu_class = ""
    admission = (obj.get("status") or {}).get("admission") or {}
    for assignment in admission.get("podSetAssignments") or []:
        for resource, flavor in (assignment.get("flavors") or {}).items():
            if resource in gpus:
                gpu_class = classes_by_flavor.get(flavor, flavor)
    state = _workload_state(obj)
    return WorkloadObservation(
        name=obj["metadata"]["name"],
        queue=str(spec.get("queueName") or ""),
        state=state,
        gpus=min(sum(gpus.values()), MAX_QUANTITY),
        gpu_class=gpu_class or gpu_class_of(gpus, tenant),
        created_at=created(obj),
        pods=min(sum(_pods(p) for p in spec.get("podSets") or []) or 1, MAX_QUANTITY),
        priority=_priority(spec),
        message=_waiting_message(obj) if state == "pending" else "",
    )


def positions(summary: Manifest) -> dict[str, int]:
    """Workload name -> place in its LocalQueue (1 is next) from a visibility API `PendingWorkloadsSummary`.

    Kueue counts `positionInLocalQueue` from 0 (apis/visibility/v1beta2/types.go); gpucloud from 1.
    """
    out: dict[str, int] = {}
    for item in summary.get("items") or []:
        name = (item.get("metadata") or {}).get("name")
        place = item.get("positionInLocalQueue")
        if name and isinstance(place, int) and place >= 0:
            out[name] = place + 1
    return out
