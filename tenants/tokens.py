"""API tokens: `gpc_` + 8-character lookup prefix + 32-character secret.

Only the prefix and an HMAC-SHA256 of the whole token (keyed from SECRET_KEY) are stored; the token itself
is returned once, on creation. Checking compares digests in constant time.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import string
from datetime import datetime

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from tenants import audit
from tenants.audit import Actor
from tenants.models import ApiToken

KIND = "gpc_"
ALPHABET = string.ascii_letters + string.digits
PREFIX_LENGTH = 8
SECRET_LENGTH = 32


def digest(token: str) -> str:
    key = hashlib.sha256(("gpucloud.api-token:" + settings.SECRET_KEY).encode()).digest()
    return hmac.new(key, token.encode(), hashlib.sha256).hexdigest()


def _random(length: int) -> str:
    return "".join(secrets.choice(ALPHABET) for _ in range(length))


@transaction.atomic
def create_token(
    *, actor: Actor, user: User, name: str, expires_at: datetime | None = None
) -> tuple[ApiToken, str]:
    """Make a token for `user`; returns the row and the token text, which is never stored."""
    prefix = _random(PREFIX_LENGTH)
    while ApiToken.objects.filter(prefix=prefix).exists():
        prefix = _random(PREFIX_LENGTH)
    token = f"{KIND}{prefix}{_random(SECRET_LENGTH)}"
    row = ApiToken.objects.create(
        user=user, name=name, prefix=prefix, digest=digest(token), expires_at=expires_at
    )
    audit.record(
        actor,
        "token.create",
        object_type="api_token",
        object_id=row.public_id,
        after={"user": user.get_username(), "name": name, "prefix": prefix},
    )
    return row, token


def authenticate(token: str) -> ApiToken | None:
    """The live token row `token` names, or None if it is unknown, wrong, revoked or expired."""
    if not token.startswith(KIND) or len(token) != len(KIND) + PREFIX_LENGTH + SECRET_LENGTH:
        return None
    row = (
        ApiToken.objects.select_related("user")
        .filter(prefix=token[len(KIND) : len(KIND) + PREFIX_LENGTH])
        .first()
    )
    if row is None or not hmac.compare_digest(row.digest, digest(token)):
        return None
    if row.revoked_at is not None or (row.expires_at is not None and row.expires_at <= timezone.now()):
        return None
    return row


def touch(row: ApiToken, address: str) -> None:
    """Record use, at most once a minute per token so reads stay cheap."""
    now = timezone.now()
    if row.last_used_at and (now - row.last_used_at).total_seconds() < 60 and row.last_used_ip == address:
        return
    ApiToken.objects.filter(pk=row.pk).update(last_used_at=now, last_used_ip=address[:45])
