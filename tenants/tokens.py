"""API tokens: `gpc_` + 8-character lookup prefix + 32-character secret.

Only the prefix and an HMAC-SHA256 of the whole token (keyed from SECRET_KEY) are stored; the token itself
is returned once, on creation. Checking compares digests in constant time.

Personal tokens act as their user, capped by their scope. A tenant service token (for Terraform, GitOps)
gets an account of its own, `svc.<tenant>.<prefix>`, holding one role in that tenant only (viewer, member or
admin for the scopes read, write, admin), so it is scoped by the same memberships as everyone else.

A SCIM token (scope `scim`) is an identity provider's: only a platform administrator makes one, it gets an
account of its own, `scim.<prefix>`, with no role anywhere, and it is accepted at `/scim/v2/` only; the REST
API refuses it, and SCIM refuses every other token (`tenants.scim.views`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from core import audit
from core.audit import Actor
from core.declared import source_problem
from core.permissions import SERVICE_TOKEN_ROLE
from gpucloud.bearer import BearerKind, lapsed, random_text
from gpucloud.errors import Conflict, PermissionDenied, ValidationFailed
from tenants.models import ApiToken, Membership, Tenant
from tenants.services import members
from tenants.services.roles import require

KIND = "gpc_"
TOKEN = BearerKind(KIND, "gpucloud.api-token")
digest = TOKEN.digest


def token_snapshot(row: ApiToken) -> dict[str, Any]:
    return {
        "user": row.user.get_username(),
        "tenant": row.tenant.slug if row.tenant else None,
        "name": row.name,
        "prefix": row.prefix,
        "scope": row.scope,
        "source": row.source,
        "expires_at": row.expires_at.isoformat() if row.expires_at else None,
        "revoked_at": row.revoked_at.isoformat() if row.revoked_at else None,
    }


# The scopes of personal and tenant service tokens; `scim` tokens are made by `create_scim_token` only.
SCOPES = (ApiToken.Scope.READ, ApiToken.Scope.WRITE, ApiToken.Scope.ADMIN)
SCIM_ACCOUNT_PREFIX = "scim."


def _validate(actor: Actor, name: str, scope: str, expires_at: datetime | None, source: str) -> None:
    if not name.strip():
        raise ValidationFailed.on("name", "a token needs a name saying where it is used")
    if scope == ApiToken.Scope.SCIM:
        raise ValidationFailed.on(
            "scope",
            "a SCIM token is made by a platform administrator at /api/v1/scim/tokens/, not as a personal or "
            "service token",
        )
    if scope not in SCOPES:
        allowed = ", ".join(SCOPES)
        raise ValidationFailed.on("scope", f"{scope!r} is not a scope; use one of: {allowed}")
    if expires_at is not None and expires_at <= timezone.now():
        raise ValidationFailed.on("expires_at", "the expiry must be in the future")
    if source:
        # A source owns what it applied and its prune deletes it: who applies as which is the platform's call.
        if not actor.is_platform_admin:
            raise PermissionDenied("binding a token to a manifest source is for platform administrators")
        problem = source_problem(source)
        if problem is not None:
            raise ValidationFailed.on("source", problem)


def _issue(
    *,
    user: User,
    tenant: Tenant | None,
    actor: Actor,
    name: str,
    scope: str,
    expires_at: datetime | None,
    source: str,
) -> tuple[ApiToken, str]:
    prefix, token = TOKEN.issue(lambda p: ApiToken.objects.filter(prefix=p).exists())
    row = ApiToken.objects.create(
        user=user,
        tenant=tenant,
        created_by=actor.user,
        name=name.strip(),
        scope=scope,
        source=source,
        prefix=prefix,
        digest=digest(token),
        expires_at=expires_at,
    )
    audit.record(
        actor,
        "token.create",
        object_type="api_token",
        object_id=row.public_id,
        tenant=tenant,
        after=token_snapshot(row),
    )
    return row, token


@transaction.atomic
def create_token(
    *,
    actor: Actor,
    user: User,
    name: str,
    scope: str = ApiToken.Scope.ADMIN,
    expires_at: datetime | None = None,
    source: str = "",
) -> tuple[ApiToken, str]:
    """Make a personal token for `user`; returns the row and the token text, which is never stored.

    The default scope, `admin`, is what every token could do before scopes existed (callers in code and
    the CLI); the API asks people to choose and defaults to `read`. `source` binds it to a manifest source
    (platform administrators only).
    """
    _validate(actor, name, scope, expires_at, source)
    if actor.user is not None and actor.user != user and not actor.is_platform_admin:
        raise PermissionDenied("only a platform administrator can make a token for someone else")
    if is_service_account(user):
        raise PermissionDenied(
            "a tenant service token cannot make personal tokens; its tenant's owners and admins make more "
            "service tokens at /tenants/{slug}/tokens/"
        )
    return _issue(
        user=user, tenant=None, actor=actor, name=name, scope=scope, expires_at=expires_at, source=source
    )


def is_service_account(user: User) -> bool:
    """Whether `user` is the account of a tenant service token or of a SCIM token, not a person."""
    return (
        ApiToken.objects.filter(user=user)
        .filter(Q(tenant__isnull=False) | Q(scope=ApiToken.Scope.SCIM))
        .exists()
    )


@transaction.atomic
def create_service_token(
    *,
    actor: Actor,
    tenant: Tenant,
    name: str,
    scope: str = ApiToken.Scope.READ,
    expires_at: datetime | None = None,
    source: str = "",
) -> tuple[ApiToken, str]:
    """Make a tenant service token: its own account with one role in `tenant`, nothing anywhere else.
    `source` binds it to a manifest source (platform administrators only)."""
    require(actor, tenant, "token.manage", "managing service tokens")
    _validate(actor, name, scope, expires_at, source)
    if tenant.state in (Tenant.State.DELETING, Tenant.State.DELETED):
        raise Conflict(f"tenant {tenant.slug} is {tenant.state}; it can get no new tokens")
    account = User.objects.create_user(f"svc.{tenant.slug}.{random_text(8).lower()}")
    account.set_unusable_password()
    account.save(update_fields=["password"])
    Membership.objects.create(
        tenant=tenant, user=account, role=SERVICE_TOKEN_ROLE[scope], source=Membership.Source.TOKEN
    )
    members.access_changed(tenant)
    return _issue(
        user=account, tenant=tenant, actor=actor, name=name, scope=scope, expires_at=expires_at, source=source
    )


@transaction.atomic
def create_scim_token(*, actor: Actor, name: str, expires_at: datetime | None = None) -> tuple[ApiToken, str]:
    """Make a token for an identity provider to provision people over SCIM (docs/scim.md).

    Only a platform administrator may: SCIM creates and deactivates accounts and grants every role the
    groups name. The token gets an account of its own (`scim.<random>`), which holds no role and is the
    actor of everything SCIM writes; `created_by` is the administrator.
    """
    if not actor.is_platform_admin:
        raise PermissionDenied("only a platform administrator can make a SCIM token")
    _validate(actor, name, ApiToken.Scope.READ, expires_at, "")
    account = User.objects.create_user(f"{SCIM_ACCOUNT_PREFIX}{random_text(8).lower()}")
    account.set_unusable_password()
    account.save(update_fields=["password"])
    return _issue(
        user=account,
        tenant=None,
        actor=actor,
        name=name,
        scope=ApiToken.Scope.SCIM,
        expires_at=expires_at,
        source="",
    )


@transaction.atomic
def revoke_token(*, actor: Actor, token: ApiToken) -> ApiToken:
    """Stop a token working at once; a service token's account loses its role and is deactivated."""
    if token.tenant is not None:
        require(actor, token.tenant, "token.manage", "managing service tokens")
    elif token.scope == ApiToken.Scope.SCIM and not actor.is_platform_admin:
        raise PermissionDenied("only a platform administrator can revoke a SCIM token")
    elif actor.user != token.user and not actor.is_platform_admin:
        raise PermissionDenied("only the token's owner or a platform administrator can revoke it")
    token = ApiToken.objects.select_for_update(of=("self",)).select_related("user", "tenant").get(pk=token.pk)
    if token.revoked_at is not None:
        return token
    before = token_snapshot(token)
    token.revoked_at = timezone.now()
    token.save(update_fields=["revoked_at"])
    if token.tenant is not None:
        Membership.objects.filter(user=token.user, source=Membership.Source.TOKEN).delete()
        User.objects.filter(pk=token.user.pk).update(is_active=False)
        members.access_changed(token.tenant)
    elif token.scope == ApiToken.Scope.SCIM:
        User.objects.filter(pk=token.user.pk).update(is_active=False)  # its account serves nothing else
    audit.record(
        actor,
        "token.revoke",
        object_type="api_token",
        object_id=token.public_id,
        tenant=token.tenant,
        before=before,
        after=token_snapshot(token),
    )
    return token


@transaction.atomic
def revoke_personal_tokens(*, actor: Actor, user: User) -> int:
    """Revoke every live personal token of `user` (someone who lost all access); returns how many.

    A person may revoke their own; a platform administrator or a process (single sign-on, SCIM) anyone's.
    """
    if actor.user != user and not actor.manages_people:
        raise PermissionDenied("only the tokens' owner or a platform administrator can revoke them")
    live = (
        ApiToken.objects.select_for_update()
        .select_related("user")
        .filter(user=user, tenant=None, revoked_at=None)
    )
    now = timezone.now()
    for token in live:
        before = token_snapshot(token)
        token.revoked_at = now
        token.save(update_fields=["revoked_at"])
        audit.record(
            actor,
            "token.revoke",
            object_type="api_token",
            object_id=token.public_id,
            before=before,
            after=token_snapshot(token),
        )
    return len(live)


def check(token: str) -> tuple[ApiToken | None, str]:
    """The live token row `token` names, or None and the reason it is refused."""
    prefix = TOKEN.prefix_of(token)
    if prefix is None:
        return None, "the bearer token is not a gpucloud token (gpc_…)"
    row = ApiToken.objects.select_related("user", "tenant").filter(prefix=prefix).first()
    if row is None or not TOKEN.matches(row.digest, token):
        return None, "the bearer token is unknown"
    why = lapsed("the bearer token", row.revoked_at, row.expires_at, timezone.now())
    return (None, why) if why else (row, "")


def authenticate(token: str) -> ApiToken | None:
    """The live token row `token` names, or None if it is unknown, wrong, revoked or expired."""
    return check(token)[0]


def touch(row: ApiToken, address: str) -> None:
    """Record use, at most once a minute per token and address so reads stay cheap."""
    now = timezone.now()
    if row.last_used_at and (now - row.last_used_at).total_seconds() < 60 and row.last_used_ip == address:
        return
    ApiToken.objects.filter(pk=row.pk).update(last_used_at=now, last_used_ip=address[:45])
