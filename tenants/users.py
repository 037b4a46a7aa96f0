"""Local accounts, made and kept by platform administrators: create, deactivate, reset the password.

A generated password is returned once to show to the administrator, who passes it on; only its hash is
kept. Every change is audited. Accounts from single sign-on are made at sign-in (`tenants.sso`), not here.
"""

from __future__ import annotations

import re
import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.db import transaction

from gpucloud.errors import Conflict, PermissionDenied, ValidationFailed
from tenants import audit
from tenants.audit import Actor

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
    """Deactivate an account (it can no longer sign in or use its tokens), or reactivate it."""
    _require_admin(actor, "deactivating an account" if not active else "reactivating an account")
    if actor.user is not None and actor.user.pk == user.pk and not active:
        raise Conflict("you cannot deactivate your own account; ask another platform administrator")
    if user.is_active == active:
        return
    user.is_active = active
    user.save(update_fields=["is_active"])
    audit.record(
        actor,
        "user.activate" if active else "user.deactivate",
        object_type="user",
        object_id=user.get_username(),
        before={"active": not active},
        after={"active": active},
    )
