"""Kueue's `Workload` objects as a tenant's workloads page shows them (`WorkloadObservation`).

The kubernetes driver lists them once per pass across the tenants' namespaces (they are Kueue's, not
gpucloud's, so no label selects them) and reads each with `workload_of`.

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

__all__ = ["workload_of"]

GPU_RESOURCE_PREFIX = "nvidia.com/"


def _condition(obj: Manifest, kind: str) -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions)


def _workload_state(obj: Manifest) -> Literal["admitted", "pending", "finished"]:
    """Finished once `Finished=True`; admitted while `Admitted=True` (quota reserved and checks passed)."""
    if _condition(obj, "Finished"):
        return "finished"
    return "admitted" if _condition(obj, "Admitted") else "pending"


def _pod_set_gpus(pod_set: Manifest) -> dict[str, int]:
    """GPU units per resource name one pod set asks for: its count × each pod's requests (or limits)."""
    asked: dict[str, int] = {}
    spec = ((pod_set.get("template") or {}).get("spec")) or {}
    for container in spec.get("containers") or []:
        resources = container.get("resources") or {}
        wanted = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
        for name, value in wanted.items():
            if name.startswith(GPU_RESOURCE_PREFIX):
                asked[name] = asked.get(name, 0) + quantity(value, Decimal(1))
    pods = count(str(pod_set.get("count", 1)))
    return {name: units * pods for name, units in asked.items()}


def _created(obj: Manifest) -> datetime | None:
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
    if not gpu_class and gpus:
        resource = sorted(gpus)[0]
        by_resource = [q.gpu_class for q in tenant.quotas if q.resource_name == resource]
        gpu_class = by_resource[0] if len(by_resource) == 1 else resource
    return WorkloadObservation(
        name=obj["metadata"]["name"],
        queue=str(spec.get("queueName") or ""),
        state=_workload_state(obj),
        gpus=min(sum(gpus.values()), MAX_QUANTITY),
        gpu_class=gpu_class,
        created_at=_created(obj),
    )
