"""Every write to tenants, members and quotas goes through here.

Each service validates, writes in one transaction, writes its audit row, and asks for a reconcile once the
transaction has committed (so a worker never reads a state that was rolled back).

Lock order. Every transaction takes its row locks in one global order, so no two ever wait for each other in
a circle (PostgreSQL's "deadlock detected"):

  1. tenant rows, by id;
  2. admission rows (`tenants.capacity`), by (host cluster id, GPU model id).

A service takes at most one of each, in that order (`set_quota`: its tenant, then its model's admission row).
A transaction that makes several changes (an apply) takes every lock its changes will take first, in that
order, with `lock_in_order`. A transaction the database still ends for another's sake (a tenant created in
the same apply takes its admission rows as it goes) is run again by `gpucloud.transactions.atomic`, which
every service here opens its transaction with.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from core import audit
from core.audit import Actor
from core.declared import refuse_undone_edit
from core.permissions import SCOPE_NEEDED, roles_with, scope_allows
from fleet.models import GpuClass, HostCluster
from gpucloud.celery import enqueue_tenant_reconcile
from gpucloud.errors import Conflict, NotFound, PermissionDenied, ValidationFailed
from gpucloud.limits import integer_range
from gpucloud.transactions import atomic
from tenants import tiers
from tenants.capacity import admit, lock_admissions, pick_host_cluster
from tenants.models import SLUG_RE, InvalidTransition, Membership, Quota, Tenant, TenantCluster

User = get_user_model()


def role_of(actor: Actor, tenant: Tenant) -> str | None:
    if actor.user is None:
        return None
    membership = Membership.objects.filter(tenant=tenant, user=actor.user).first()
    return membership.role if membership else None


def can(actor: Actor, tenant: Tenant, permission: str) -> bool:
    """Whether the actor holds `permission` (core.permissions) in the tenant (by role: what a page shows;
    `require`, which every write goes through, also checks the token's scope)."""
    return actor.is_platform_admin or role_of(actor, tenant) in roles_with(permission)


def require(actor: Actor, tenant: Tenant, permission: str, what: str) -> None:
    """Refuse unless the actor's token scope allows `permission` and the actor is a platform admin or holds it
    in the tenant: the one check of an action, whatever door it came through (REST, /apply/, the portal)."""
    if not scope_allows(actor.scope, permission):
        raise PermissionDenied(
            f"{what} needs a token with scope {SCOPE_NEEDED[permission]!r}; this token has scope "
            f"{actor.scope!r}"
        )
    roles = roles_with(permission)
    if actor.is_platform_admin or role_of(actor, tenant) in roles:
        return
    allowed = ", ".join(sorted(roles)) or "platform administrators only"
    raise PermissionDenied(f"{what} needs one of these roles in tenant {tenant.slug}: {allowed}")


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


def _reconcile_on_commit(tenant: Tenant) -> None:
    tenant_id = tenant.pk
    transaction.on_commit(lambda: enqueue_tenant_reconcile(tenant_id))


def access_changed(tenant: Tenant) -> None:
    """Memberships of the tenant changed: its cluster must rewrite the bindings inside it
    (clusters/access/rbac.py).

    The generation is bumped in the caller's transaction, so the tenant page says "not yet reflected" from
    the commit on; the reconcile enqueued on commit runs the access pass.
    """
    # On the tenant's row: membership changes lock it already (`_lock_memberships`), and the reconciler writes
    # the cluster row before the tenant row, so taking the cluster row here could deadlock with it.
    Tenant.objects.filter(pk=tenant.pk).update(access_generation=F("access_generation") + 1)
    _reconcile_on_commit(tenant)


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


def require_tenant_creator(actor: Actor) -> None:
    """Refuse (403) anyone who may not create tenants: platform administrators only. The portal asks before it
    shows the form, so nobody fills it in to be refused."""
    if not actor.is_platform_admin:
        raise PermissionDenied("creating a tenant needs a platform administrator")


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
    tenant = Tenant.objects.create(slug=slug, display_name=display_name or slug, trust_tier=trust_tier)
    TenantCluster.objects.create(
        tenant=tenant, host_cluster=host_cluster or pick_host_cluster(), namespace=f"tenant-{slug}"
    )
    if actor.user is not None:
        Membership.objects.create(tenant=tenant, user=actor.user, role=Membership.Role.OWNER)
    _audit_tenant(actor, "tenant.create", tenant, None)
    _reconcile_on_commit(tenant)
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
    _reconcile_on_commit(tenant)
    return tenant


SLEEP_DELAY_RE = re.compile(r"^(?=\d)(\d+h)?(\d+m)?(\d+s)?$")


def sleep_delay_problem(value: str) -> str | None:
    """Why `value` is not a sleep delay, or None. vCluster's `sleep.auto.afterInactivity` is a Go duration;
    gpucloud accepts hours, minutes, seconds, at least a minute, or empty (the host cluster's default)."""
    if value and (not SLEEP_DELAY_RE.fullmatch(value) or _seconds_of(value) < 60):
        return (
            f"{value!r} is not a delay of at least a minute; write it like 45m, 2h or 1h30m, or leave it "
            "empty"
        )
    return None


def _validate_sleep_delay(value: str) -> None:
    problem = sleep_delay_problem(value)
    if problem is not None:
        raise ValidationFailed.on("sleep_after_inactivity", problem)


def _seconds_of(value: str) -> int:
    units = {"h": 3600, "m": 60, "s": 1}
    return sum(int(n) * units[u] for n, u in re.findall(r"(\d+)([hms])", value))


@atomic
def set_sleep_settings(
    *,
    actor: Actor,
    tenant: Tenant,
    sleep_after_inactivity: str | None = None,
    sleep_when_idle: bool | None = None,
) -> Tenant:
    """The tenant's vCluster sleep mode (`sleep.auto.afterInactivity`, empty = the host cluster's default) and
    whether gpucloud may put its cluster to sleep when metering finds its GPUs idle. Owners and admins."""
    require(actor, tenant, "tenant.update", "changing the sleep settings")
    tenant = Tenant.objects.select_for_update().get(pk=tenant.pk)
    _require_live(tenant, "changing the sleep settings")
    before = {
        "sleep_after_inactivity": tenant.sleep_after_inactivity,
        "sleep_when_idle": tenant.sleep_when_idle,
    }
    if sleep_after_inactivity is not None:
        _validate_sleep_delay(sleep_after_inactivity.strip())
        tenant.sleep_after_inactivity = sleep_after_inactivity.strip()
    if sleep_when_idle is not None:
        tenant.sleep_when_idle = sleep_when_idle
    after = {
        "sleep_after_inactivity": tenant.sleep_after_inactivity,
        "sleep_when_idle": tenant.sleep_when_idle,
    }
    if after == before:
        return tenant
    refuse_undone_edit(actor, "Tenant", tenant.slug, ["sleep"], "changing the sleep settings")
    tenant.save(update_fields=["sleep_after_inactivity", "sleep_when_idle", "updated_at"])
    audit.record(
        actor,
        "tenant.sleep_settings",
        object_type="tenant",
        object_id=tenant.public_id,
        tenant=tenant,
        before=before,
        after=after,
    )
    _reconcile_on_commit(tenant)
    return tenant


def _idleness(tenant: Tenant) -> dict[str, Any]:
    """The tenant's idle flag and sleep as audited, the same fields before and after."""
    return {
        "idle_since": tenant.idle_since and tenant.idle_since.isoformat(),
        "asleep": tenant.asleep_since is not None,
    }


@atomic
def flag_idle(*, actor: Actor, tenant: Tenant, since: Any, at: Any = None) -> bool:
    """Metering found the tenant's GPUs idle since `since`: flag it and, when it opted in, put its cluster to
    sleep (its pods go, its guarantee is lent to its cohort). Returns whether it was put to sleep now."""
    tenant = Tenant.objects.select_for_update().get(pk=tenant.pk)
    if tenant.idle_since is not None:
        return False  # flagged already: told once
    before = _idleness(tenant)
    tenant.idle_since = since
    sleep = tenant.sleep_when_idle and tenant.state == Tenant.State.READY
    if sleep:
        tenant.asleep_since = at or timezone.now()
    tenant.save(update_fields=["idle_since", "asleep_since", "updated_at"])
    audit.record(
        actor,
        "tenant.idle",
        object_type="tenant",
        object_id=tenant.public_id,
        tenant=tenant,
        before=before,
        after=_idleness(tenant),
    )
    if sleep:
        _reconcile_on_commit(tenant)
    return sleep


@atomic
def wake_tenant(*, actor: Actor, tenant: Tenant, reason: str = "woken") -> Tenant:
    """Wake a tenant cluster gpucloud put to sleep, or clear its idle flag: its quota returns to it at the
    next pass, and idleness counts afresh from now. The team may do it (any kubectl call of theirs would,
    too); metering does it when it sees activity."""
    if not actor.label.startswith("system:"):
        require(actor, tenant, "tenant.wake", "waking the cluster")
    tenant = Tenant.objects.select_for_update().get(pk=tenant.pk)
    if tenant.idle_since is None and tenant.asleep_since is None:
        return tenant
    before = _idleness(tenant)
    tenant.idle_since = tenant.asleep_since = None
    tenant.woken_at = timezone.now()
    tenant.save(update_fields=["idle_since", "asleep_since", "woken_at", "updated_at"])
    audit.record(
        actor,
        "tenant.wake",
        object_type="tenant",
        object_id=tenant.public_id,
        tenant=tenant,
        before=before,
        after={**_idleness(tenant), "reason": reason},
    )
    _reconcile_on_commit(tenant)
    return tenant


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
    _reconcile_on_commit(tenant)
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


def _require_live(tenant: Tenant, what: str) -> None:
    if tenant.state in (Tenant.State.DELETING, Tenant.State.DELETED):
        raise Conflict(f"tenant {tenant.slug} is {tenant.state}; {what} is no longer possible")


def membership_snapshot(membership: Membership) -> dict[str, Any]:
    return {"user": membership.user.get_username(), "role": membership.role, "source": membership.source}


def _lock_memberships(tenant: Tenant) -> None:
    # Membership changes of one tenant are serialised on its row, so two owners demoting (or removing)
    # each other at once cannot both pass the last-owner check and leave the tenant with none.
    Tenant.objects.select_for_update().filter(pk=tenant.pk).first()


def _require_owner_rights(actor: Actor, tenant: Tenant, what: str) -> None:
    if not can(actor, tenant, "member.manage_owners"):
        raise PermissionDenied(
            f"{what} needs an owner of tenant {tenant.slug} or a platform administrator; "
            "admins manage every other role"
        )


def require_member_grant(actor: Actor, tenant: Tenant, role: str) -> None:
    """The checks of `add_member` that do not need the person's account: may `actor` give `role` here?
    (Invitations of people without an account yet, `tenants.invitations`, make them.)"""
    require(actor, tenant, "member.manage", "managing members")
    _require_live(tenant, "changing members")
    if role not in Membership.Role.values:
        allowed = ", ".join(Membership.Role.values)
        raise ValidationFailed.on("role", f"{role!r} is not a role; use one of: {allowed}")
    if role == Membership.Role.OWNER:
        _require_owner_rights(actor, tenant, "making someone an owner")


@atomic
def add_member(*, actor: Actor, tenant: Tenant, username: str, role: str) -> Membership:
    """Give a user a role in the tenant, or change the role they have.

    Only owners (and platform administrators) make someone an owner or change an owner's role; the last
    owner keeps the role.
    """
    require(actor, tenant, "member.manage", "managing members")
    _require_live(tenant, "changing members")
    if role not in Membership.Role.values:
        allowed = ", ".join(Membership.Role.values)
        raise ValidationFailed.on("role", f"{role!r} is not a role; use one of: {allowed}")
    user = User.objects.filter(username=username).first()
    if user is None:
        raise ValidationFailed.on(
            "username",
            f"there is no user called {username!r}; to invite someone who has not signed in yet, give "
            "their e-mail address",
        )
    _lock_memberships(tenant)
    existing = Membership.objects.select_for_update().filter(tenant=tenant, user=user).first()
    if role == Membership.Role.OWNER:
        _require_owner_rights(actor, tenant, "making someone an owner")
    elif existing and existing.role == Membership.Role.OWNER:
        _require_owner_rights(actor, tenant, f"changing the role of {username}, an owner,")
    before = membership_snapshot(existing) if existing else None
    if existing and existing.role == role and existing.source == Membership.Source.MANUAL:
        return existing
    refuse_undone_edit(actor, "Tenant", tenant.slug, ["members"], f"giving {username} the role {role}")
    if existing and existing.role == Membership.Role.OWNER and role != Membership.Role.OWNER:
        _refuse_last_owner(tenant, existing)
    # A role given by hand is the tenant's own decision: it becomes `manual` and sign-ins leave it alone.
    membership, _ = Membership.objects.update_or_create(
        tenant=tenant, user=user, defaults={"role": role, "source": Membership.Source.MANUAL}
    )
    access_changed(tenant)
    audit.record(
        actor,
        "member.add" if before is None else "member.update",
        object_type="membership",
        object_id=f"{tenant.slug}/{username}",
        tenant=tenant,
        before=before,
        after=membership_snapshot(membership),
    )
    return membership


def _refuse_last_owner(tenant: Tenant, membership: Membership) -> None:
    owners = Membership.objects.filter(tenant=tenant, role=Membership.Role.OWNER).count()
    if owners <= 1:
        raise Conflict(
            f"{membership.user.get_username()} is the last owner of {tenant.slug}; make someone else an "
            "owner first"
        )


@atomic
def remove_member(*, actor: Actor, tenant: Tenant, membership: Membership) -> None:
    """Take a user's role in the tenant away. Only owners remove an owner, and never the last one."""
    require(actor, tenant, "member.manage", "managing members")
    _lock_memberships(tenant)
    current = Membership.objects.select_related("user").filter(pk=membership.pk).first()
    if current is None:
        raise NotFound(f"{membership.user.get_username()} has no role in {tenant.slug} any more")
    if current.source == Membership.Source.MANUAL:  # SSO and token roles are never in a manifest
        refuse_undone_edit(
            actor, "Tenant", tenant.slug, ["members"], f"removing {current.user.get_username()}"
        )
    if current.role == Membership.Role.OWNER:
        _require_owner_rights(actor, tenant, f"removing {current.user.get_username()}, an owner,")
        _refuse_last_owner(tenant, current)
    before = membership_snapshot(current)
    current.delete()
    access_changed(tenant)
    audit.record(
        actor,
        "member.remove",
        object_type="membership",
        object_id=f"{tenant.slug}/{before['user']}",
        tenant=tenant,
        before=before,
    )


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
    _require_live(tenant, "changing quotas")
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
        _reconcile_on_commit(tenant)
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
    _reconcile_on_commit(tenant)


@atomic
def set_platform_admin(*, actor: Actor, user: Any, admin: bool) -> bool:
    """Make `user` a platform administrator, or stop them being one; returns whether anything changed.

    Platform administrators may do everything in every tenant, so this is audited like any other write. A
    person must be a platform administrator to do it; a process (the console, single sign-on) and the
    identity provider's groups over SCIM are trusted.
    """
    if not actor.manages_people:
        raise PermissionDenied("naming platform administrators needs a platform administrator")
    user = User.objects.select_for_update().get(pk=user.pk)
    if user.is_staff == admin:
        return False
    user.is_staff = admin
    user.save(update_fields=["is_staff"])
    audit.record(
        actor,
        "user.platform_admin",
        object_type="user",
        object_id=user.get_username(),
        before={"platform_admin": not admin},
        after={"platform_admin": admin},
    )
    return True


def _sso_audit(actor: Actor, action: str, tenant: Tenant, before: Any, after: Any, username: str) -> None:
    audit.record(
        actor,
        action,
        object_type="membership",
        object_id=f"{tenant.slug}/{username}",
        tenant=tenant,
        before=before,
        after=after,
    )


@atomic
def sync_sso_memberships(*, actor: Actor, user: Any, grants: dict[Tenant, str]) -> None:
    """Make the user's `sso` memberships exactly `grants` (tenant → role), keeping hand-granted ones.

    Called at every sign-in with what the provider's groups say now, so a group removed at the provider
    removes the role here. A `manual` membership of the same tenant wins and is never touched.
    """
    current = {m.tenant_id: m for m in Membership.objects.select_for_update().filter(user=user)}
    wanted = {tenant.pk: (tenant, role) for tenant, role in grants.items()}
    username = user.get_username()
    for membership in current.values():
        if membership.source == Membership.Source.SSO and membership.tenant_id not in wanted:
            before = membership_snapshot(membership)
            membership.delete()
            access_changed(membership.tenant)
            _sso_audit(actor, "member.remove", membership.tenant, before, None, username)
    for tenant_pk, (tenant, role) in wanted.items():
        existing = current.get(tenant_pk)
        if existing is None:
            created = Membership.objects.create(tenant=tenant, user=user, role=role, source="sso")
            access_changed(tenant)
            _sso_audit(actor, "member.add", tenant, None, membership_snapshot(created), username)
        elif existing.source == Membership.Source.SSO and existing.role != role:
            before = membership_snapshot(existing)
            existing.role = role
            existing.save(update_fields=["role"])
            access_changed(tenant)
            _sso_audit(actor, "member.update", tenant, before, membership_snapshot(existing), username)
