"""Talking SCIM to the server as an identity provider does, through Django's test client."""

from __future__ import annotations

import json
from typing import Any

from django.test import Client

PATCH_OP = "urn:ietf:params:scim:api:messages:2.0:PatchOp"
USER_SCHEMA = "urn:ietf:params:scim:schemas:core:2.0:User"
GROUP_SCHEMA = "urn:ietf:params:scim:schemas:core:2.0:Group"
ERROR_SCHEMA = "urn:ietf:params:scim:api:messages:2.0:Error"


class Scim:
    """A SCIM client with a bearer token; every call returns (status, JSON body or None)."""

    def __init__(self, token: str) -> None:
        self.client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")

    def call(self, method: str, path: str, body: Any = None, **headers: Any) -> tuple[int, Any]:
        response = self.client.generic(
            method,
            f"/scim/v2/{path.lstrip('/')}",
            data=json.dumps(body) if body is not None else "",
            content_type="application/scim+json",
            **headers,
        )
        assert response["Content-Type"].startswith("application/scim+json") or not response.content
        return response.status_code, (response.json() if response.content else None)

    def user(self, username: str, **attributes: Any) -> dict[str, Any]:
        status, body = self.call(
            "POST", "Users", {"schemas": [USER_SCHEMA], "userName": username, **attributes}
        )
        assert status == 201, body
        user: dict[str, Any] = body
        return user

    def group(self, name: str, members: list[str] = (), **attributes: Any) -> dict[str, Any]:  # type: ignore[assignment]
        document = {"schemas": [GROUP_SCHEMA], "displayName": name, **attributes}
        document["members"] = [{"value": m} for m in members]
        status, body = self.call("POST", "Groups", document)
        assert status == 201, body
        group: dict[str, Any] = body
        return group

    def patch(self, path: str, *operations: dict[str, Any]) -> tuple[int, Any]:
        return self.call("PATCH", path, {"schemas": [PATCH_OP], "Operations": list(operations)})

    def ids(self, path: str) -> list[str]:
        status, body = self.call("GET", path)
        assert status == 200, body
        return [r["id"] for r in body["Resources"]]
