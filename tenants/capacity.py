"""Fleet capacity per GPU class, and what tenants' guarantees already take of it.

A MIG or shared class is counted in whole GPUs of its model, each class packed on its own GPUs
(⌈units / units per GPU⌉), so the guarantees of all classes of one model never need more healthy GPUs than
the fleet has. Mixing profiles on one GPU could fit more; the MIG planner may refine this, but admission
never promises what the hardware cannot hold.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

from django.db.models import Count, Q, Sum

from scheduling.models import Gpu, GpuClass, Node
from tenants.models import Quota, Tenant


@dataclass(frozen=True)
class ClassCapacity:
    gpu_class: str
    gpu_model: str
    kind: str
    capacity: int  # units of the class the healthy fleet could give if its GPUs held only this class
    guaranteed: int  # units guaranteed to tenants
    available: int  # units that can still be guaranteed, given every class of the same model
    healthy_gpus: int  # healthy GPUs of the model


def healthy_gpus_by_model() -> dict[str, int]:
    rows = (
        Gpu.objects.filter(health=Gpu.Health.HEALTHY, node__state=Node.State.READY)
        .values("gpu_model__slug")
        .annotate(n=Count("id"))
    )
    return {row["gpu_model__slug"]: row["n"] for row in rows}


def guaranteed_by_class(exclude_tenant: Tenant | None = None) -> dict[str, int]:
    quotas = Quota.objects.exclude(tenant__state=Tenant.State.DELETED)
    if exclude_tenant is not None:
        quotas = quotas.exclude(tenant=exclude_tenant)
    rows = quotas.values("gpu_class__name").annotate(total=Sum("guaranteed")).filter(~Q(total=0))
    return {row["gpu_class__name"]: row["total"] for row in rows}


def gpus_needed(gpu_class: GpuClass, units: int) -> int:
    return math.ceil(units / gpu_class.units_per_gpu())


def capacity_table(exclude_tenant: Tenant | None = None) -> list[ClassCapacity]:
    """Capacity, guarantees and availability of every GPU class, in one pass over three queries."""
    classes = list(GpuClass.objects.select_related("gpu_model"))
    healthy = healthy_gpus_by_model()
    guaranteed = guaranteed_by_class(exclude_tenant)
    held_by_model: dict[str, int] = defaultdict(int)
    for gpu_class in classes:
        held_by_model[gpu_class.gpu_model.slug] += gpus_needed(gpu_class, guaranteed.get(gpu_class.name, 0))
    return [_row(c, healthy, guaranteed, held_by_model) for c in classes]


def _row(
    gpu_class: GpuClass, healthy: dict[str, int], guaranteed: dict[str, int], held_by_model: dict[str, int]
) -> ClassCapacity:
    model = gpu_class.gpu_model.slug
    per_gpu = gpu_class.units_per_gpu()
    mine = guaranteed.get(gpu_class.name, 0)
    # GPUs held by the other classes of this model are out of reach of this class.
    free_gpus = healthy.get(model, 0) - (held_by_model[model] - gpus_needed(gpu_class, mine))
    return ClassCapacity(
        gpu_class=gpu_class.name,
        gpu_model=model,
        kind=gpu_class.kind,
        capacity=healthy.get(model, 0) * per_gpu,
        guaranteed=mine,
        available=max(0, free_gpus * per_gpu - mine),
        healthy_gpus=healthy.get(model, 0),
    )


def capacity_of(gpu_class: GpuClass, exclude_tenant: Tenant | None = None) -> ClassCapacity:
    return next(row for row in capacity_table(exclude_tenant) if row.gpu_class == gpu_class.name)
