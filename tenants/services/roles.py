"""Who may do what in a tenant: the role a person holds there, and `require`, the one check every write makes
whatever door it came through (REST, /apply/, the portal, a token)."""

from __future__ import annotations

from core.audit import Actor
from core.permissions import SCOPE_NEEDED, roles_with, scope_allows
from gpucloud.errors import PermissionDenied
from tenants.models import Membership, Tenant


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


def require_tenant_creator(actor: Actor) -> None:
    """Refuse (403) anyone who may not create tenants: platform administrators only. The portal asks before it
    shows the form, so nobody fills it in to be refused."""
    if not actor.is_platform_admin:
        raise PermissionDenied("creating a tenant needs a platform administrator")
