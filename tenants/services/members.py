"""Members: roles given by hand, roles granted by the identity provider's groups at sign-in, and the access
generation every membership change bumps so the tenant cluster rewrites its bindings."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import F

from core import audit
from core.audit import Actor
from core.declared import refuse_undone_edit
from gpucloud.errors import Conflict, NotFound, PermissionDenied, ValidationFailed
from gpucloud.transactions import atomic
from tenants.models import Membership, Tenant
from tenants.services.lifecycle import reconcile_on_commit, require_live
from tenants.services.roles import can, require

User = get_user_model()


def access_changed(tenant: Tenant) -> None:
    """Memberships of the tenant changed: its cluster must rewrite the bindings inside it
    (clusters/access/rbac.py).

    The generation is bumped in the caller's transaction, so the tenant page says "not yet reflected" from
    the commit on; the reconcile enqueued on commit runs the access pass.
    """
    # On the tenant's row: membership changes lock it already (`_lock_memberships`), and the reconciler writes
    # the cluster row before the tenant row, so taking the cluster row here could deadlock with it.
    Tenant.objects.filter(pk=tenant.pk).update(access_generation=F("access_generation") + 1)
    reconcile_on_commit(tenant)


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
    require_live(tenant, "changing members")
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
    require_live(tenant, "changing members")
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
