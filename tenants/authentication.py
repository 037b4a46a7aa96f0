"""`Authorization: Bearer gpc_…` for the REST API."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions
from rest_framework.request import Request

from gpucloud.observability import current_context
from tenants import tokens
from tenants.models import ApiToken


class BearerTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[Any, Any] | None:
        header = authentication.get_authorization_header(request).decode(errors="replace")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer":
            return None
        row, reason = tokens.check(token.strip())
        if row is None:
            raise exceptions.AuthenticationFailed(reason)
        if row.scope == ApiToken.Scope.SCIM:
            raise exceptions.AuthenticationFailed("a SCIM token is accepted at /scim/v2/ only")
        if not row.user.is_active:
            raise exceptions.AuthenticationFailed("the token's user is deactivated")
        tokens.touch(row, current_context().source_ip or request.META.get("REMOTE_ADDR", ""))
        return row.user, row

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="gpucloud"'


class BearerTokenScheme(OpenApiAuthenticationExtension):
    """How the OpenAPI schema names the bearer token (drf-spectacular finds it by subclassing)."""

    target_class = BearerTokenAuthentication
    name = "bearerAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {"type": "http", "scheme": "bearer", "description": "A gpucloud API token, gpc_…"}
