"""The bearer secrets gpucloud hands out, API tokens (`gpc_`, `tenants/tokens.py`) and inference keys (`gpk_`,
`inference/keys.py`): a kind, an 8-character lookup prefix and a 32-character secret.

Only the prefix and an HMAC-SHA256 of the whole text are stored, keyed from SECRET_KEY with a purpose of each
kind's own (so one kind's digest is never another's); the text is returned once, on creation. A check finds
the row by its prefix and compares digests in constant time.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import string
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings

ALPHABET = string.ascii_letters + string.digits
PREFIX_LENGTH = 8
SECRET_LENGTH = 32


def random_text(length: int) -> str:
    """`length` letters and digits from the system's secure random source."""
    return "".join(secrets.choice(ALPHABET) for _ in range(length))


@dataclass(frozen=True)
class BearerKind:
    """One kind of bearer secret: its text's start (`gpc_`) and the purpose its digest is keyed with."""

    start: str
    purpose: str

    @property
    def length(self) -> int:
        return len(self.start) + PREFIX_LENGTH + SECRET_LENGTH

    def digest(self, text: str) -> str:
        key = hashlib.sha256((self.purpose + ":" + settings.SECRET_KEY).encode()).digest()
        return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()

    def issue(self, taken: Callable[[str], bool]) -> tuple[str, str]:
        """A new (prefix, text); `taken` says whether a prefix is in use already."""
        prefix = random_text(PREFIX_LENGTH)
        while taken(prefix):
            prefix = random_text(PREFIX_LENGTH)
        return prefix, f"{self.start}{prefix}{random_text(SECRET_LENGTH)}"

    def prefix_of(self, text: str) -> str | None:
        """The lookup prefix of a text of this kind, or None when the text is not one."""
        if not text.startswith(self.start) or len(text) != self.length:
            return None
        return text[len(self.start) : len(self.start) + PREFIX_LENGTH]

    def matches(self, stored: str, text: str) -> bool:
        return hmac.compare_digest(stored, self.digest(text))


def lapsed(what: str, revoked_at: datetime | None, expires_at: datetime | None, now: datetime) -> str:
    """Why a found secret no longer works ("the bearer token was revoked at …"), or "" if it still does."""
    if revoked_at is not None:
        return f"{what} was revoked at {revoked_at:%Y-%m-%dT%H:%M:%SZ}"
    if expires_at is not None and expires_at <= now:
        return f"{what} expired at {expires_at:%Y-%m-%dT%H:%M:%SZ}"
    return ""
