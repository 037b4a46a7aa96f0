"""Reads of what runs on the fleet, for pages and reports."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from scheduling.models import GpuClass, SimulatedPod


def units_in_use(tenant_ids: Iterable[int]) -> dict[tuple[int, str], int]:
    """Units of each GPU class the tenants' running pods hold now: (tenant id, class name) → units.

    A whole-GPU pod holds one unit per GPU; a MIG instance or a share is one unit of its class.
    """
    pods = SimulatedPod.objects.filter(tenant_id__in=list(tenant_ids), finished_at__isnull=True).values_list(
        "tenant_id", "gpu_class__name", "gpu_class__kind", "gpu_uuids"
    )
    used: dict[tuple[int, str], int] = defaultdict(int)
    for tenant_id, name, kind, uuids in pods:
        used[(tenant_id, name)] += len(uuids) if kind == GpuClass.Kind.WHOLE else 1
    return used
