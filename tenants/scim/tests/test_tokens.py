"""SCIM tokens: made by platform administrators only, good at /scim/v2/ only; no other token opens SCIM."""

from __future__ import annotations

import pytest

from core.audit import Actor
from core.models import AuditEvent
from gpucloud.errors import PermissionDenied, ValidationFailed
from tenants import tokens
from tenants.scim.tests.helpers import Scim


def test_a_platform_administrator_makes_a_scim_token_through_the_api_and_it_provisions(api, people):
    made = api(people["admin"]).post("/api/v1/scim/tokens/", {"name": "entra"}, format="json")

    assert made.status_code == 201, made.json()
    assert made.json()["scope"] == "scim"
    assert made.json()["user"].startswith("scim.")
    assert Scim(made.json()["token"]).call("GET", "Users")[0] == 200
    assert AuditEvent.objects.filter(action="token.create", actor_label="admin (token test)").exists()
    assert [t["name"] for t in api(people["admin"]).get("/api/v1/scim/tokens/").json()["results"]] == [
        "entra"
    ]


def test_nobody_else_makes_one_by_any_door(api, people):
    refused = api(people["alice"]).post("/api/v1/scim/tokens/", {"name": "mine"}, format="json")
    assert refused.status_code == 403
    assert "platform administrators" in refused.json()["detail"]
    with pytest.raises(PermissionDenied):
        tokens.create_scim_token(actor=Actor.of(people["alice"]), name="mine")
    personal = api(people["alice"]).post("/api/v1/tokens/", {"name": "x", "scope": "scim"}, format="json")
    assert personal.status_code == 400
    with pytest.raises(ValidationFailed, match="/api/v1/scim/tokens/"):
        tokens.create_token(actor=Actor.of(people["alice"]), user=people["alice"], name="x", scope="scim")
    service = api(people["alice"]).post(
        "/api/v1/tenants/tenant-a/tokens/", {"name": "x", "scope": "scim"}, format="json"
    )
    assert service.status_code == 400


def test_a_tenant_owner_s_token_and_a_platform_administrator_s_own_cannot_use_scim(people):
    for person in ("alice", "admin"):
        _, token = tokens.create_token(
            actor=Actor.of(people[person]), user=people[person], name="t", scope="admin"
        )
        status, body = Scim(token).call("GET", "Users")
        assert status == 403, person
        assert body["schemas"] == ["urn:ietf:params:scim:api:messages:2.0:Error"]
        assert "SCIM takes only a SCIM token" in body["detail"]


def test_a_scim_token_is_refused_by_the_rest_api_and_stops_when_revoked(api, people, scim_token):
    answer = api(None).get("/api/v1/tenants/", HTTP_AUTHORIZATION=f"Bearer {scim_token}")
    assert answer.status_code == 401
    assert "/scim/v2/" in answer.json()["detail"]

    row = tokens.check(scim_token)[0]
    assert row is not None
    tokens.revoke_token(actor=Actor.of(people["admin"]), token=row)

    status, body = Scim(scim_token).call("GET", "Users")
    assert status == 401
    assert "revoked" in body["detail"]


def test_no_token_is_401_with_a_bearer_challenge(client, db):
    response = client.get("/scim/v2/Users")
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert response["Content-Type"].startswith("application/scim+json")
    assert client.get("/scim/v2/ServiceProviderConfig").json()["etag"] == {"supported": True}
