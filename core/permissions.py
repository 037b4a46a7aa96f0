"""Who may do what: the one permission matrix the services, the API and the portal all consult.

Platform administrators may do everything. Everyone else acts through their role in a tenant; a permission
lists the roles that hold it. docs/permissions.md is this table in prose; change both together.
"""

from __future__ import annotations

from typing import Any

OWNER, ADMIN, MEMBER, VIEWER, BILLING = "owner", "admin", "member", "viewer", "billing"
ROLES = (OWNER, ADMIN, MEMBER, VIEWER, BILLING)
TEAM = frozenset({OWNER, ADMIN, MEMBER, VIEWER})
MANAGERS = frozenset({OWNER, ADMIN})

PERMISSIONS: dict[str, frozenset[str]] = {
    # the tenant itself
    "tenant.view": frozenset(ROLES),
    "tenant.update": MANAGERS,
    "tenant.suspend": MANAGERS,
    "tenant.delete": frozenset({OWNER}),
    "tenant.wake": TEAM,  # waking an idle cluster asleep (any kubectl call of theirs would wake it too)
    # people and their roles
    "member.view": TEAM,
    "member.manage": MANAGERS,
    "member.manage_owners": frozenset({OWNER}),  # make an owner, change an owner's role, remove an owner
    # quotas are read by the team and set by platform administrators only
    "quota.view": frozenset(ROLES),
    "quota.manage": frozenset(),
    # the tenant cluster
    "kubeconfig.download": TEAM,  # each person's own credential, bound to their role inside the cluster
    "kubeconfig.admin": frozenset({OWNER}),  # break-glass: the vCluster's admin kubeconfig
    # where the tenant stands: quota use, borrowing, lending, pods' GPU utilisation (its cost: billing.view)
    "usage.view": frozenset(ROLES),
    # money
    "billing.view": frozenset({OWNER, ADMIN, BILLING}),
    "invoice.download": frozenset({OWNER, ADMIN, BILLING}),
    "budget.manage": MANAGERS,
    # tenant service tokens and the audit log
    "token.manage": MANAGERS,
    "audit.view": MANAGERS,
    # inference endpoints: the team sees them, members run them, managers publish them to other tenants
    "inference.view": TEAM,
    "inference.manage": frozenset({OWNER, ADMIN, MEMBER}),
    "inference.publish": MANAGERS,
}

# The role a tenant service token's account holds, by the token's scope.
SERVICE_TOKEN_ROLE = {"read": VIEWER, "write": MEMBER, "admin": ADMIN}

# Token scopes, weakest first, and the least scope each permission needs. A bearer token's scope caps what it
# may do whatever its user's roles, and this cap is checked with the role, by the service (`require`), so it
# holds through every door: /members/, /apply/, anything later. (A `read` token is refused every write at the
# API's door already: `tenants.api.permissions.TokenScope`.)
READ, WRITE, ADMIN_SCOPE = "read", "write", "admin"
SCOPE_RANK: dict[str, int] = {READ: 0, WRITE: 1, ADMIN_SCOPE: 2}
SCOPE_NEEDED: dict[str, str] = {
    "tenant.view": READ,
    "tenant.update": WRITE,
    "tenant.suspend": WRITE,
    "tenant.delete": WRITE,
    "tenant.wake": WRITE,
    "member.view": READ,
    "member.manage": ADMIN_SCOPE,
    "member.manage_owners": ADMIN_SCOPE,
    "quota.view": READ,
    "quota.manage": WRITE,
    "kubeconfig.download": READ,
    "kubeconfig.admin": READ,
    "usage.view": READ,
    "billing.view": READ,
    "invoice.download": READ,
    "budget.manage": WRITE,
    "token.manage": ADMIN_SCOPE,
    "audit.view": READ,
    "inference.view": READ,
    "inference.manage": WRITE,
    "inference.publish": WRITE,
}


def is_platform_admin(user: Any) -> bool:
    """Whether `user` is a platform administrator: the one place that says so.

    The flag is Django's `is_staff` (gpucloud has no Django admin site, so it means only this). It is set by
    `manage.py platform_admin` and, for people who sign in through the identity provider, by OIDC_ADMIN_GROUPS
    at every sign-in (`tenants.services.platform_admins.set_platform_admin`, audited either way).
    """
    return bool(user is not None and user.is_authenticated and user.is_active and user.is_staff)


def roles_with(permission: str) -> frozenset[str]:
    """The tenant roles holding `permission`; an unknown name is a programming error, not a refusal."""
    return PERMISSIONS[permission]


def allows(role: str | None, permission: str) -> bool:
    return role is not None and role in PERMISSIONS[permission]


def scope_allows(scope: str, permission: str) -> bool:
    """Whether a token of `scope` may use `permission`; "" is no token (a session, the console, a process)."""
    return not scope or SCOPE_RANK[scope] >= SCOPE_RANK[SCOPE_NEEDED[permission]]
