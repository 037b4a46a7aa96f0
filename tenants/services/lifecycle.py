"""A tenant's life: create, rename or re-tier, suspend, resume, delete; and the two things every tenant write
shares (the reconcile asked for on commit, the refusal of a tenant being deleted)."""

from __future__ import annotations

import re
from typing import Any

from django.db import transaction

from core import audit
from core.audit import Actor
from core.declared import refuse_undone_edit
from fleet.models import HostCluster
from gpucloud.celery import enqueue_tenant_reconcile
from gpucloud.errors import Conflict, PermissionDenied, ValidationFailed
from gpucloud.transactions import atomic
from tenants import tiers
from tenants.capacity import admit, host_cluster_of, lock_admissions, pick_host_cluster
from tenants.models import SLUG_RE, InvalidTransition, Membership, Tenant, TenantCluster
from tenants.services.roles import require, require_tenant_creator


def tenant_snapshot(tenant: Tenant) -> dict[str, Any]:
    return {
        "slug": tenant.slug,
        "display_name": tenant.display_name,
        "trust_tier": tenant.trust_tier,
        "state": tenant.state,
    }


def _audit_tenant(actor: Actor, action: str, tenant: Tenant, before: dict[str, Any] | None) -> None:
    audit.record(
        actor,
        action,
        object_type="tenant",
        object_id=tenant.public_id,
        tenant=tenant,
        before=before,
        after=tenant_snapshot(tenant),
    )


def reconcile_on_commit(tenant: Tenant) -> None:
    """Ask for the tenant's reconcile once the caller's transaction commits (never for a rolled-back one)."""
    tenant_id = tenant.pk
    transaction.on_commit(lambda: enqueue_tenant_reconcile(tenant_id))


def require_live(tenant: Tenant, what: str) -> None:
    """Refuse (409) `what` on a tenant being deleted or deleted."""
    if tenant.state in (Tenant.State.DELETING, Tenant.State.DELETED):
        raise Conflict(f"tenant {tenant.slug} is {tenant.state}; {what} is no longer possible")


def _validate_slug(slug: str) -> None:
    # fullmatch, not match: `$` also matches before a final newline, which let "ab\n" through.
    if not re.fullmatch(SLUG_RE, slug or ""):
        raise ValidationFailed.on(
            "slug",
            f"{slug!r} is not a valid slug: use 1-40 lowercase letters, digits and hyphens, starting with a "
            "letter and not ending with a hyphen",
        )
    if Tenant.objects.filter(slug=slug).exists():
        raise Conflict(
            f"the slug {slug!r} is taken (slugs are never reused)", errors={"slug": ["already taken"]}
        )


def _validate_display_name(display_name: str) -> None:
    limit = Tenant._meta.get_field("display_name").max_length or 0
    if len(display_name) > limit:
        raise ValidationFailed.on(
            "display_name",
            f"the display name has {len(display_name)} characters; at most {limit} are allowed",
        )


def _validate_tier(trust_tier: str) -> None:
    if trust_tier not in Tenant.TrustTier.values:
        allowed = ", ".join(Tenant.TrustTier.values)
        raise ValidationFailed.on("trust_tier", f"{trust_tier!r} is not a trust tier; use one of: {allowed}")


def _refuse_retired_meanwhile(host_cluster_id: int) -> None:
    """Read after the tenant cluster row is written: that insert waits for a retire holding the host
    cluster's row (clusters/lifecycle.py), so a retire that committed since the host cluster was read is seen
    here, and the tenant is refused with it (the transaction rolls back)."""
    retired = HostCluster.objects.filter(pk=host_cluster_id, state=HostCluster.State.RETIRED)
    name = retired.values_list("name", flat=True).first()
    if name is not None:
        raise Conflict(
            f"host cluster {name} was retired meanwhile: it takes no tenants; try again",
            errors={"host_cluster": ["retired: takes no tenants"]},
        )


@atomic
def create_tenant(
    *,
    actor: Actor,
    slug: str,
    display_name: str = "",
    trust_tier: str = Tenant.TrustTier.STANDARD,
    host_cluster: HostCluster | None = None,
) -> Tenant:
    """Create a tenant and its (pending) tenant cluster; the creator becomes its owner."""
    require_tenant_creator(actor)
    _validate_slug(slug)
    _validate_display_name(display_name)
    _validate_tier(trust_tier)
    if host_cluster is not None and host_cluster.retired:
        raise Conflict(
            f"host cluster {host_cluster.name} is retired: it is kept for its history and takes no tenants; "
            "name another, or none to let gpucloud pick",
            errors={"host_cluster": ["retired: takes no tenants"]},
        )
    if host_cluster is not None and host_cluster.cordoned:
        raise Conflict(
            f"host cluster {host_cluster.name} is cordoned for new tenants "
            f"({host_cluster.cordon_reason or 'no reason given'}); name another, or none to let gpucloud "
            "pick",
            errors={"host_cluster": ["cordoned: takes no new tenants"]},
        )
    tenant = Tenant.objects.create(slug=slug, display_name=display_name or slug, trust_tier=trust_tier)
    cluster = TenantCluster.objects.create(
        tenant=tenant, host_cluster=host_cluster or pick_host_cluster(), namespace=f"tenant-{slug}"
    )
    _refuse_retired_meanwhile(cluster.host_cluster_id)
    if actor.user is not None:
        Membership.objects.create(tenant=tenant, user=actor.user, role=Membership.Role.OWNER)
    _audit_tenant(actor, "tenant.create", tenant, None)
    reconcile_on_commit(tenant)
    return tenant


@atomic
def update_tenant(
    *, actor: Actor, tenant: Tenant, display_name: str | None = None, trust_tier: str | None = None
) -> Tenant:
    """Change the display name (owners and admins) or the trust tier (platform administrators)."""
    require(actor, tenant, "tenant.update", "renaming a tenant")
    tenant = Tenant.objects.select_for_update().get(pk=tenant.pk)
    if tenant.state == Tenant.State.DELETED:
        raise Conflict(f"tenant {tenant.slug} is deleted and cannot change")
    before = tenant_snapshot(tenant)
    if display_name is not None:
        if not display_name.strip():
            raise ValidationFailed.on("display_name", "the display name may not be blank")
        _validate_display_name(display_name.strip())
        tenant.display_name = display_name.strip()
    if trust_tier is not None and trust_tier != tenant.trust_tier:
        if not actor.is_platform_admin:
            raise PermissionDenied("changing the trust tier needs a platform administrator")
        _validate_tier(trust_tier)
        _refuse_quotas_beyond_tier(tenant, trust_tier)
        tenant.trust_tier = trust_tier
        if trust_tier == Tenant.TrustTier.ISOLATED:
            _admit_in_whole_nodes(tenant)
    if tenant_snapshot(tenant) == before:
        return tenant
    changed = {"displayName": "display_name", "trustTier": "trust_tier"}
    refuse_undone_edit(
        actor,
        "Tenant",
        tenant.slug,
        [field for field, key in changed.items() if before[key] != getattr(tenant, key)],
        f"changing {tenant.slug}",
    )
    tenant.save()
    _audit_tenant(actor, "tenant.update", tenant, before)
    reconcile_on_commit(tenant)
    return tenant


def _admit_in_whole_nodes(tenant: Tenant) -> None:
    """A tenant becoming isolated holds its guarantees in whole nodes (`tenants.capacity`): each is admitted
    again so, and the change is refused (422) where the host cluster has not the whole nodes for them."""
    quotas = list(tenant.quotas.filter(guaranteed__gt=0).select_related("gpu_class__gpu_model"))
    if not quotas:
        return
    host_cluster = host_cluster_of(tenant)
    lock_admissions((host_cluster.pk, q.gpu_class.gpu_model_id) for q in quotas)  # in the global lock order
    for quota in quotas:
        admit(tenant, quota.gpu_class, quota.guaranteed)


def _refuse_quotas_beyond_tier(tenant: Tenant, trust_tier: str) -> None:
    """A tier may not change under quotas it does not allow (the tenant row is locked, so no quota of such a
    class can be set meanwhile: `set_quota` locks it too)."""
    classes = [q.gpu_class for q in tenant.quotas.select_related("gpu_class__gpu_model")]
    forbidden = tiers.forbidden_classes(trust_tier, classes)
    if forbidden:
        raise Conflict(
            f"tenant {tenant.slug} holds quotas of {', '.join(forbidden)}, which a {trust_tier} tenant may "
            f"not hold ({tiers.RULE}); remove those quotas first",
            errors={"trust_tier": [f"remove the quotas of {', '.join(forbidden)} first"]},
            quotas=forbidden,
        )


def _transition(actor: Actor, tenant: Tenant, state: str, action: str, reason: str = "") -> Tenant:
    tenant = Tenant.objects.select_for_update().get(pk=tenant.pk)
    before = tenant_snapshot(tenant)
    try:
        tenant.transition(state, reason)
    except InvalidTransition as exc:
        raise Conflict(str(exc), current_state=before["state"]) from None
    tenant.save(update_fields=["state", "state_reason", "deleted_at", "updated_at"])
    _audit_tenant(actor, action, tenant, before)
    reconcile_on_commit(tenant)
    return tenant


@atomic
def suspend_tenant(*, actor: Actor, tenant: Tenant) -> Tenant:
    """Put the tenant's cluster to sleep: its workloads stop, its objects and quotas stay."""
    require(actor, tenant, "tenant.suspend", "suspending a tenant")
    return _transition(actor, tenant, Tenant.State.SUSPENDED, "tenant.suspend")


@atomic
def resume_tenant(*, actor: Actor, tenant: Tenant) -> Tenant:
    """Wake a suspended tenant, or retry a failed one."""
    require(actor, tenant, "tenant.suspend", "resuming a tenant")
    targets: dict[str, str] = {
        Tenant.State.SUSPENDED: Tenant.State.PROVISIONING,
        Tenant.State.FAILED: Tenant.State.PENDING,
    }
    if tenant.state not in targets:
        raise Conflict(
            f"tenant {tenant.slug} is {tenant.state}; only a suspended or failed tenant can be resumed",
            current_state=tenant.state,
        )
    return _transition(actor, tenant, targets[tenant.state], "tenant.resume")


@atomic
def delete_tenant(*, actor: Actor, tenant: Tenant) -> Tenant:
    """Start deleting: the reconciler removes the tenant cluster, then marks the tenant deleted."""
    require(actor, tenant, "tenant.delete", "deleting a tenant")
    refuse_undone_edit(actor, "Tenant", tenant.slug, None, f"deleting {tenant.slug}")
    return _transition(actor, tenant, Tenant.State.DELETING, "tenant.delete")
