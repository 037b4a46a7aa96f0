"""The API's door check of a bearer token's scope: a `read` token writes nothing. What a write needs beyond
that (`admin` to manage people and tokens) is checked with the roles by the services
(`tenants.services.roles.require`, `core.permissions.SCOPE_NEEDED`), so it holds through every door."""

from __future__ import annotations

from typing import Any

from rest_framework import permissions
from rest_framework.request import Request

from core.permissions import SCOPE_RANK
from tenants.models import ApiToken

SAFE = frozenset(permissions.SAFE_METHODS)


class TokenScope(permissions.BasePermission):
    """Reads need any scope; writes need `write`, or `admin` on views that set `write_scope = "admin"` (the
    personal tokens of /tokens/, which no tenant permission covers).

    Session callers (the portal, the browsable docs) are not capped: their roles decide alone.
    """

    message = "this token's scope does not allow it"

    def has_permission(self, request: Request, view: Any) -> bool:
        token = request.auth
        if not isinstance(token, ApiToken) or request.method in SAFE:
            return True
        needed = str(getattr(view, "write_scope", ApiToken.Scope.WRITE))  # the value, not the enum's name
        if SCOPE_RANK[token.scope] >= SCOPE_RANK[needed]:
            return True
        self.message = (
            f"this token has scope {token.scope!r}; {request.method} here needs a token with scope {needed!r}"
        )
        return False
