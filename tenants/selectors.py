"""Reads that decide what a caller may see. Every tenant-owned query starts from `visible_tenants`; the reads
at the end (a tenant's quotas, members, tokens, audit events) take a tenant that has been scoped so already.

One answer, whatever the door (API or portal), to "may this person read this of a tenant":
- a tenant they do not belong to (or none of that name) is 404, exactly like one that does not exist;
- a tenant they belong to, in a role that lacks the permission, is 403 naming the roles that hold it
  (`forbidden`); the API and the portal say it in the same words;
- a list across tenants holds the tenants where they have the permission; someone who belongs to tenants
  but has it in none of them is refused (403 naming the roles), as each of those tenants' pages refuses them.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import QuerySet

from core.models import AuditEvent
from core.permissions import is_platform_admin, roles_with
from gpucloud.errors import NotFound, PermissionDenied
from tenants.models import ApiToken, DedicatedNode, Invitation, Membership, Quota, Tenant


def visible_tenants(user: Any, permission: str = "tenant.view") -> QuerySet[Tenant]:
    """Tenants in which the user holds `permission`: all for platform administrators, else by membership.

    With the default permission this is every tenant the user belongs to; anything else (another tenant)
    is "not found" to them.
    """
    if not user.is_authenticated or not user.is_active:
        return Tenant.objects.none()
    if is_platform_admin(user):
        return Tenant.objects.all()
    return Tenant.objects.filter(
        memberships__user=user, memberships__role__in=roles_with(permission)
    ).distinct()


def forbidden(permission: str, tenant: str | None = None) -> PermissionDenied:
    """The 403 of someone whose role may not do `permission`: it names the roles that may (in `tenant`, or
    in any tenant of theirs when the refusal is about a list across tenants)."""
    roles = sorted(roles_with(permission))
    allowed = ", ".join(roles) or "platform administrators only"
    if tenant:
        detail = f"{permission} needs one of these roles in tenant {tenant}: {allowed}"
    else:
        detail = (
            f"{permission} needs one of these roles in a tenant: {allowed}; you have none in any of yours"
        )
    return PermissionDenied(detail, permission=permission, allowed_roles=roles)


def tenant_for(user: Any, slug: str, permission: str = "tenant.view", *related: str) -> Tenant:
    """The tenant `slug` if `user` belongs to it (else NotFound, as if it did not exist) and holds
    `permission` there (else `forbidden`); `related`, relations to load with it."""
    tenant = visible_tenants(user).select_related(*related).filter(slug=slug).first()
    if tenant is None:
        raise NotFound(f"there is no tenant {slug!r} you can see")
    if not holds(user, tenant, permission):
        raise forbidden(permission, tenant.slug)
    return tenant


def tenants_for(user: Any, permission: str) -> QuerySet[Tenant]:
    """The scope of a list across tenants: where `user` holds `permission`. Someone who belongs to tenants
    but holds it in none is refused (`forbidden`); someone in no tenant at all gets nothing to list."""
    tenants = visible_tenants(user, permission)
    if permission != "tenant.view" and not tenants.exists() and visible_tenants(user).exists():
        raise forbidden(permission)
    return tenants


def holds(user: Any, tenant: Tenant, permission: str) -> bool:
    """Whether `user` holds `permission` in `tenant` (platform administrators hold every one)."""
    if is_platform_admin(user):
        return True
    role = Membership.objects.filter(tenant=tenant, user=user).values_list("role", flat=True).first()
    return role in roles_with(permission)


# What a page shows of a tenant it already holds: `tenant` comes from `tenant_for` (or `visible_tenants`), so
# these add no scoping of their own.


def quotas_of(tenant: Tenant) -> QuerySet[Quota]:
    """The tenant's quotas with their classes, by class name."""
    return tenant.quotas.select_related("gpu_class").order_by("gpu_class__name")


def dedicated_nodes_of(tenant: Tenant) -> QuerySet[DedicatedNode]:
    """The host nodes dedicated to the tenant (isolated tenants), with their nodes, by name."""
    return tenant.dedicated_nodes.select_related("node").order_by("node__name")


def members_of(tenant: Tenant) -> QuerySet[Membership]:
    """The tenant's memberships with their users, by username."""
    return tenant.memberships.select_related("user").order_by("user__username")


def pending_invitations(tenant: Tenant) -> QuerySet[Invitation]:
    """Invitations of the tenant nobody has accepted yet."""
    return tenant.invitations.filter(accepted_at=None).select_related("invited_by")


def service_tokens(tenant: Tenant) -> QuerySet[ApiToken]:
    """The tenant's service tokens, newest first."""
    return ApiToken.objects.filter(tenant=tenant).select_related("user", "created_by").order_by("-created_at")


def personal_tokens(user: Any) -> QuerySet[ApiToken]:
    """The user's own tokens (no tenant), newest first."""
    return (
        ApiToken.objects.filter(user=user.pk, tenant=None)
        .select_related("user", "created_by")
        .order_by("-created_at")
    )


def token_with_id(public_id: str) -> ApiToken | None:
    """The token `tok_…` with its tenant, whoever holds it: the caller decides whether it may be seen."""
    return ApiToken.objects.select_related("tenant").filter(public_id=public_id).first()


def audit_events(tenant: Tenant | None = None) -> QuerySet[AuditEvent]:
    """Audit events, newest first: the tenant's, or with no tenant every one (platform administrators)."""
    events = AuditEvent.objects.select_related("tenant").order_by("-created_at", "-id")
    return events if tenant is None else events.filter(tenant=tenant)


def accounts() -> QuerySet[Any]:
    """Every account with its identities and roles, by username (platform administrators' Users page)."""
    return get_user_model().objects.prefetch_related("identities", "memberships__tenant").order_by("username")
