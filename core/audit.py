"""Who did a write, and the audit row every service writes about it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser, User
from django.db.models import Model

from core.models import AuditEvent
from core.permissions import is_platform_admin
from gpucloud.observability import current_context


@dataclass(frozen=True)
class Actor:
    """The person, token or process on whose behalf a service writes.

    `scope` is the scope of the bearer token it acts through ("" without one: a portal session, the console,
    a process), which caps its permissions in every service (`core.permissions.scope_allows`). `source` is
    the manifest source a write comes from (`gitops.apply` sets it: `gitops:<name>`, `api:<username>` …; ""
    for a direct edit), which is what may change the fields that source declares (`core.declared`).
    """

    user: User | None
    label: str
    operator: bool = False  # someone at the server's console (manage.py): a platform administrator
    provisioner: bool = False  # an identity provider over SCIM: manages people's accounts, nothing else
    scope: str = ""
    source: str = ""

    @classmethod
    def system(cls, process: str) -> Actor:
        return cls(user=None, label=f"system:{process}")

    @classmethod
    def console(cls, command: str) -> Actor:
        return cls(user=None, label=f"console:{command}", operator=True)

    @classmethod
    def of(
        cls, user: User | AbstractBaseUser | AnonymousUser, token_name: str = "", scope: str = ""
    ) -> Actor:
        if not user.is_authenticated:
            return cls(user=None, label="anonymous")
        label = user.get_username() + (f" (token {token_name})" if token_name else "")
        return cls(user=user, label=label, scope=scope)  # type: ignore[arg-type]

    @classmethod
    def scim(cls, user: User, token_name: str) -> Actor:
        """The identity provider holding a SCIM token (`user` is the token's own account)."""
        return cls(user=user, label=f"{user.get_username()} (SCIM token {token_name})", provisioner=True)

    @property
    def is_platform_admin(self) -> bool:
        return self.operator or is_platform_admin(self.user)

    @property
    def manages_people(self) -> bool:
        """Whether it may create, change and deactivate anyone's account: a platform administrator, a
        process (single sign-on), or the identity provider over SCIM."""
        return self.user is None or self.is_platform_admin or self.provisioner


def record(
    actor: Actor,
    action: str,
    *,
    object_type: str,
    object_id: str,
    tenant: Model | None = None,
    before: dict[str, Any] | None = None,
    after: dict[str, Any] | None = None,
) -> AuditEvent:
    """Write one audit row inside the caller's transaction, with the current request's context."""
    context = current_context()
    return AuditEvent.objects.create(
        actor=actor.user,
        actor_label=actor.label[:150],
        tenant_id=None if tenant is None else tenant.pk,
        action=action,
        object_type=object_type,
        object_id=object_id,
        before=before,
        after=after,
        request_id=context.request_id,
        source_ip=context.source_ip,
        user_agent=context.user_agent,
    )


def record_download(actor: Actor, what: str, *, object_id: str, tenant: Model | None = None) -> AuditEvent:
    """Record that `actor` downloaded a sensitive document (`kubeconfig`, `invoice`): who, from where, with
    which client. Views serving such a download call this before sending the body."""
    return record(actor, f"{what}.download", object_type=what, object_id=object_id, tenant=tenant)


def record_sign_in(user: User | AbstractBaseUser, method: str) -> AuditEvent:
    """Record that someone signed in to the portal (`password` or `sso`), from where and with what."""
    return record(
        Actor.of(user),
        "user.sign_in",
        object_type="user",
        object_id=user.get_username(),
        after={"method": method},
    )


def record_sign_in_failure(username: str, method: str, reason: str) -> AuditEvent:
    """Record a refused sign-in (`password` or `sso`): the name tried, why, from where and with what."""
    return record(
        Actor(user=None, label="anonymous"),
        "user.sign_in_failed",
        object_type="user",
        object_id=username[:120],
        after={"method": method, "reason": reason[:500]},
    )
