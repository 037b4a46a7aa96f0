"""Accounts: local ones made by platform administrators (create, reset the password), and deactivating
anyone's, which cuts every way in at once.

A generated password is returned once to show to the administrator, who passes it on; only its hash is
kept. Every change is audited. Accounts from the identity provider are made at sign-in (`tenants.sso`) or
over SCIM (`tenants.scim`), not here; both deactivate through `set_active`.
"""

from __future__ import annotations

import re
import secrets
from importlib import import_module
from typing import Any

from django.conf import settings
from django.contrib.auth import SESSION_KEY, get_user_model
from django.contrib.auth.password_validation import validate_password
from django.contrib.sessions.backends.db import SessionStore as DatabaseSessionStore
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from core import audit
from core.audit import Actor
from gpucloud.errors import Conflict, PermissionDenied, ValidationFailed
from tenants import tokens
from tenants.models import Tenant
from tenants.services import members

User = get_user_model()
USERNAME = re.compile(r"^[\w.@+-]{1,150}$")


def _require_admin(actor: Actor, what: str) -> None:
    if not actor.is_platform_admin:
        raise PermissionDenied(f"{what} needs a platform administrator")


def _password(user: Any, password: str) -> str:
    """The password to set: the one given if it passes the validators, else a generated one."""
    if not password:
        return secrets.token_urlsafe(15)
    try:
        validate_password(password, user)
    except ValidationError as error:
        raise ValidationFailed.on("password", " ".join(error.messages)) from None
    return password


@transaction.atomic
def create_local_user(*, actor: Actor, username: str, email: str = "", password: str = "") -> tuple[Any, str]:
    """Make a local account; returns it and its password (generated when none is given), shown once."""
    _require_admin(actor, "creating an account")
    username, email = username.strip(), email.strip()
    if not USERNAME.match(username):
        raise ValidationFailed.on(
            "username", f"{username!r} is not a username: 1-150 letters, digits and . @ + - _"
        )
    if User.objects.filter(username=username).exists():
        raise Conflict(f"there is already an account called {username!r}", errors={"username": ["taken"]})
    if email and User.objects.filter(email__iexact=email).exists():
        raise Conflict(f"another account has the e-mail {email}", errors={"email": ["taken"]})
    user = User(username=username, email=email)
    secret = _password(user, password)
    user.set_password(secret)
    user.save()
    audit.record(
        actor, "user.create", object_type="user", object_id=username, after={"email": email, "local": True}
    )
    return user, secret if not password else ""


@transaction.atomic
def reset_password(*, actor: Actor, user: Any) -> str:
    """Give a local account a new generated password, returned once; its sessions are not kept."""
    _require_admin(actor, "resetting a password")
    if not user.has_usable_password():
        raise Conflict(f"{user.get_username()} signs in with single sign-on and has no password here")
    secret = secrets.token_urlsafe(15)
    user.set_password(secret)
    user.save(update_fields=["password"])
    audit.record(actor, "user.reset_password", object_type="user", object_id=user.get_username())
    return secret


@transaction.atomic
def set_active(*, actor: Actor, user: Any, active: bool) -> None:
    """Deactivate an account, or reactivate it.

    Deactivating cuts every way in at once, in this transaction: the person's personal API tokens are
    revoked, their portal sessions deleted, and their tenants' clusters unbind them at the next access pass
    (`clusters.access.rbac` binds active people only). Their memberships stay, for a reactivation; their
    tokens do not come back. A platform administrator, single sign-on or the identity provider over SCIM may.
    """
    if not actor.manages_people:
        _require_admin(actor, "deactivating an account" if not active else "reactivating an account")
    if actor.user is not None and actor.user.pk == user.pk and not active:
        raise Conflict("you cannot deactivate your own account; ask another platform administrator")
    user = User.objects.select_for_update().get(pk=user.pk)
    changed = user.is_active != active
    if changed:
        user.is_active = active
        user.save(update_fields=["is_active"])
    cut: dict[str, Any] = {}
    if not active:  # again even if already inactive: nothing it held may outlive the deactivation
        cut = {"tokens_revoked": tokens.revoke_personal_tokens(actor=actor, user=user)}
        cut["sessions_ended"] = end_sessions(user)
    for tenant in Tenant.objects.filter(memberships__user=user) if changed else []:
        members.access_changed(tenant)
    if changed:
        audit.record(
            actor,
            "user.activate" if active else "user.deactivate",
            object_type="user",
            object_id=user.get_username(),
            before={"active": not active},
            after={"active": active, **cut},
        )


def end_sessions(user: Any) -> int:
    """Delete every portal session of `user`; returns how many.

    Sessions are stored by key, not by user, so each live one is decoded (Zulip's `delete_user_sessions`
    does the same): a few thousand rows at most, as sessions last `GPUCLOUD_SESSION_AGE`. With a session
    engine that is not database-backed nothing is deleted here, and the deactivated flag alone refuses the
    sessions (every authentication backend checks it when it loads the session's user).
    """
    store = import_module(settings.SESSION_ENGINE).SessionStore
    if not issubclass(store, DatabaseSessionStore):
        return 0
    model = store.get_model_class()
    mine = [
        session.pk
        for session in model.objects.filter(expire_date__gt=timezone.now()).iterator()
        if str(session.get_decoded().get(SESSION_KEY)) == str(user.pk)
    ]
    model.objects.filter(pk__in=mine).delete()
    return len(mine)
