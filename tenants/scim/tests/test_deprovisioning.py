"""Deprovisioning without a sign-in: the provider deactivates someone over SCIM and every way in they held
stops working at once, over real HTTP (live server, a real OpenID provider for the portal session)."""

from __future__ import annotations

from typing import Any

import requests
from django.contrib.auth.models import User
from django.contrib.sessions.models import Session

from core.audit import Actor
from core.models import AuditEvent
from tenants import tokens
from tenants.models import ApiToken, Identity, Membership, ScimUser
from tenants.scim.tests.helpers import GROUP_SCHEMA, PATCH_OP, USER_SCHEMA
from tests.sso import sign_in


def scim_call(base, token, method, path, body=None):
    response = requests.request(
        method,
        f"{base}/scim/v2/{path}",
        json=body,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/scim+json"},
        timeout=10,
    )
    return response.status_code, (response.json() if response.content else None)


def test_deactivation_over_scim_refuses_the_token_and_ends_the_session_at_once(
    sso_on, live_server, make_tenant, scim_token
):
    base = live_server.url
    make_tenant("vision")
    status, ada = scim_call(base, scim_token, "POST", "Users", {"schemas": [USER_SCHEMA], "userName": "ada"})
    assert status == 201, ada
    group: dict[str, Any] = {"schemas": [GROUP_SCHEMA], "displayName": "gpucloud:vision:member"}
    group["members"] = [{"value": ada["id"]}]
    assert scim_call(base, scim_token, "POST", "Groups", group)[0] == 201
    sso_on.person("ada", [])  # the provider pushes groups over SCIM and puts none in the claim

    browser, page = sign_in(base, "ada")  # the first sign-in links the provisioned account
    assert page.status_code == 200
    assert "vision" in page.text
    account = User.objects.get(scim__public_id=ada["id"])
    assert Identity.objects.get(subject="ada").user == account
    assert User.objects.count() == 3  # admin, the SCIM token's account, ada: no second ada
    _, token = tokens.create_token(actor=Actor.of(account), user=account, name="laptop", scope="read")
    bearer = {"Authorization": f"Bearer {token}"}
    assert requests.get(f"{base}/api/v1/tenants/vision/", headers=bearer, timeout=10).status_code == 200
    assert browser.get(f"{base}/", allow_redirects=False).status_code == 200

    operation = {"op": "Replace", "value": {"active": "False"}}  # as Entra ID sends it
    status, body = scim_call(
        base, scim_token, "PATCH", f"Users/{ada['id']}", {"schemas": [PATCH_OP], "Operations": [operation]}
    )

    assert status == 200
    assert body["active"] is False
    answer = requests.get(f"{base}/api/v1/tenants/vision/", headers=bearer, timeout=10)
    assert answer.status_code == 401
    assert "revoked" in answer.json()["detail"]
    assert browser.get(f"{base}/", allow_redirects=False).status_code == 302  # signed out
    assert not [s for s in Session.objects.all() if s.get_decoded().get("_auth_user_id") == str(account.pk)]
    deactivated = AuditEvent.objects.get(action="user.deactivate", object_id="ada")
    assert deactivated.after == {"active": False, "tokens_revoked": 1, "sessions_ended": 1}
    assert deactivated.actor_label.endswith("(SCIM token okta)")
    _, again = sign_in(base, "ada")
    assert again.status_code == 403
    assert "deactivated" in again.text
    assert Membership.objects.filter(user=account).exists()  # kept for a reactivation


def test_deleting_a_person_over_scim_deprovisions_them_and_keeps_the_name_reserved(scim, make_tenant, client):
    make_tenant("vision")
    ada_id = scim.user("ada")["id"]
    scim.group("gpucloud:vision:owner", [ada_id])
    ada = User.objects.get(username="ada")
    tokens.create_token(actor=Actor.of(ada), user=ada, name="laptop", scope="read")
    client.force_login(ada)

    status, _ = scim.call("DELETE", f"Users/{ada_id}")

    assert status == 204
    ada.refresh_from_db()
    assert not ada.is_active
    assert not ScimUser.objects.filter(user=ada).exists()
    assert not Membership.objects.filter(user=ada).exists()
    assert ApiToken.objects.get(user=ada).revoked_at is not None
    assert client.get("/", follow=False).status_code == 302
    assert scim.call("GET", f"Users/{ada_id}")[0] == 404
    status, body = scim.call("POST", "Users", {"schemas": [USER_SCHEMA], "userName": "ada"})
    assert status == 409
    assert body["scimType"] == "uniqueness"
    assert AuditEvent.objects.filter(action="user.delete", object_id="ada").exists()
