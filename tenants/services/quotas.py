"""Quotas: a tenant's guaranteed and burst GPUs of one class, admitted against the host cluster's capacity;
and `lock_in_order`, which takes an apply's locks up front in the global order (the "Lock order" of
`tenants/services/__init__.py`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from django.db import transaction

from core import audit
from core.audit import Actor
from core.declared import refuse_undone_edit
from fleet.models import GpuClass
from gpucloud.errors import PermissionDenied, ValidationFailed
from gpucloud.limits import integer_range
from gpucloud.transactions import atomic
from tenants import tiers
from tenants.capacity import admit, lock_admissions
from tenants.models import Quota, Tenant, TenantCluster
from tenants.services.lifecycle import reconcile_on_commit, require_live


def lock_in_order(changes: Mapping[str, Collection[str]]) -> None:
    """Take, in the global lock order, the locks that changing these tenants will take one by one: their rows,
    then the admission rows of the GPU models whose quotas change. `changes`: tenant slug → the GPU classes
    of its quotas that change (empty if none). Call it inside the transaction, before the first change."""
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("lock_in_order() must run inside the transaction that makes the changes")
    # Only the tenant rows (not their clusters: the reconciler writes a cluster row before its tenant's).
    locked = Tenant.objects.select_for_update().filter(slug__in=list(changes)).order_by("pk")
    slugs = dict(locked.values_list("pk", "slug"))
    on = dict(TenantCluster.objects.filter(tenant_id__in=slugs).values_list("tenant_id", "host_cluster_id"))
    classes = {name for slug in slugs.values() for name in changes[slug]}
    models = dict(GpuClass.objects.filter(name__in=classes).values_list("name", "gpu_model_id"))
    lock_admissions(
        (on[pk], models[name])
        for pk, slug in slugs.items()
        for name in changes[slug]
        if pk in on and name in models
    )


def quota_snapshot(quota: Quota, gpu_class: GpuClass | None = None) -> dict[str, Any]:
    """The quota as audited; `gpu_class`, its class, when the caller has it (no query to load it)."""
    return {
        "gpu_class": (gpu_class or quota.gpu_class).name,
        "guaranteed": quota.guaranteed,
        "burst": quota.burst,
        "lendable": quota.lendable,
        "weight": quota.weight,
    }


def _count(field: str, value: Any, *, minimum: int = 0, optional: bool = False) -> int | None:
    if value is None and optional:
        return None
    maximum = integer_range(Quota, field)[1]
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
        raise ValidationFailed.on(
            field, f"{field} must be a whole number from {minimum} to {maximum}, not {value!r}"
        )
    return value


@atomic
def set_quota(
    *,
    actor: Actor,
    tenant: Tenant,
    gpu_class: GpuClass,
    guaranteed: int,
    burst: int = 0,
    lendable: int | None = None,
    weight: int = 1,
) -> tuple[Quota, bool]:
    """Set a tenant's quota of one GPU class. Returns the quota and whether it was created.

    The class must be one the tenant's trust tier allows (`tenants.tiers`), and the guarantee must fit, next
    to every other tenant's, the healthy GPUs of the host cluster the tenant runs on (`tenants.capacity`).
    The tenant row is locked (its tier cannot change meanwhile), then the (host cluster, GPU model)
    admission row, so concurrent admissions of any classes of one model pass one at a time.
    """
    if not actor.is_platform_admin:
        raise PermissionDenied("setting quotas needs a platform administrator")
    tenant = Tenant.objects.select_for_update().get(pk=tenant.pk)
    require_live(tenant, "changing quotas")
    tiers.require_allowed(tenant.trust_tier, gpu_class, who=f"tenant {tenant.slug} ({tenant.trust_tier})")
    values = {
        "guaranteed": _count("guaranteed", guaranteed),
        "burst": _count("burst", burst),
        "lendable": _count("lendable", lendable, optional=True),
        "weight": _count("weight", weight, minimum=1),
    }
    if values["lendable"] is not None and values["lendable"] > values["guaranteed"]:  # type: ignore[operator]
        raise ValidationFailed.on("lendable", "lendable cannot exceed guaranteed")
    # The tenant row is locked, so its quota of the class cannot change under us: read it before admission
    # takes the (host cluster, model) lock, which every admission of the model waits for.
    existing = Quota.objects.filter(tenant=tenant, gpu_class=gpu_class).first()
    before = quota_snapshot(existing, gpu_class) if existing else None
    if before != {"gpu_class": gpu_class.name, **values}:
        refuse_undone_edit(actor, "Tenant", tenant.slug, ["quotas"], f"setting the quota of {gpu_class.name}")
    admit(tenant, gpu_class, values["guaranteed"])  # type: ignore[arg-type]
    if existing is None:
        quota, created = Quota.objects.create(tenant=tenant, gpu_class=gpu_class, **values), True
    else:
        quota, created = existing, False
        for field, value in values.items():
            setattr(quota, field, value)
        quota.save()
    if quota_snapshot(quota, gpu_class) != before:
        audit.record(
            actor,
            "quota.set",
            object_type="quota",
            object_id=f"{tenant.slug}/{gpu_class.name}",
            tenant=tenant,
            before=before,
            after=quota_snapshot(quota, gpu_class),
        )
        reconcile_on_commit(tenant)
    quota.gpu_class = gpu_class  # the caller's answer names it: no query to load it again
    return quota, created


@atomic
def remove_quota(*, actor: Actor, quota: Quota) -> None:
    """Drop a tenant's quota of one GPU class; its guarantee returns to the pool."""
    if not actor.is_platform_admin:
        raise PermissionDenied("removing quotas needs a platform administrator")
    before = quota_snapshot(quota)
    tenant = quota.tenant
    what = f"removing the quota of {before['gpu_class']}"
    refuse_undone_edit(actor, "Tenant", tenant.slug, ["quotas"], what)
    quota.delete()
    audit.record(
        actor,
        "quota.remove",
        object_type="quota",
        object_id=f"{tenant.slug}/{before['gpu_class']}",
        tenant=tenant,
        before=before,
    )
    reconcile_on_commit(tenant)
