"""What a bearer token's scope lets it do, whatever its user's roles; the roles themselves are checked by
the services (tenants.permissions) and the querysets (tenants.selectors)."""

from __future__ import annotations

from typing import Any

from rest_framework import permissions
from rest_framework.request import Request

from tenants.models import ApiToken

SAFE = frozenset(permissions.SAFE_METHODS)
RANK: dict[str, int] = {"read": 0, "write": 1, "admin": 2}


class TokenScope(permissions.BasePermission):
    """Reads need any scope; writes need `write`, or `admin` on views that set `write_scope = "admin"`.

    Session callers (the portal, the browsable docs) are not capped: their roles decide alone.
    """

    message = "this token's scope does not allow it"

    def has_permission(self, request: Request, view: Any) -> bool:
        token = request.auth
        if not isinstance(token, ApiToken) or request.method in SAFE:
            return True
        needed = str(getattr(view, "write_scope", ApiToken.Scope.WRITE))  # the value, not the enum's name
        if RANK[token.scope] >= RANK[needed]:
            return True
        self.message = (
            f"this token has scope {token.scope!r}; {request.method} here needs a token with scope {needed!r}"
        )
        return False
