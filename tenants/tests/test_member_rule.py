"""One rule for naming someone, whatever the door (portal, API, manifests): a username must name an account;
an e-mail address names the account that has it, or else becomes an invitation (`tenants.invitations`)."""

from __future__ import annotations

import pytest

from core.audit import Actor
from gpucloud.errors import ValidationFailed
from tenants import invitations
from tenants.models import Invitation, Membership

REFUSAL = (
    "there is no user called 'dnaa'; to invite someone who has not signed in yet, give their e-mail address"
)


def test_the_service_refuses_an_unknown_username_instead_of_inviting_it(people):
    with pytest.raises(ValidationFailed) as refused:
        invitations.invite(actor=Actor.of(people["alice"]), tenant=people["a"], login="dnaa", role="member")
    assert refused.value.detail == REFUSAL
    assert refused.value.errors == {"username": [REFUSAL]}
    assert not Invitation.objects.exists()


def test_the_portal_refuses_an_unknown_username_next_to_the_field(client, people):
    client.force_login(people["alice"])
    response = client.post("/tenants/tenant-a/members/", {"username": "dnaa", "role": "member"})
    assert response.status_code == 200
    page = response.content.decode()
    assert "there is no user called &#x27;dnaa&#x27;" in page
    assert 'id="id_username-errors"' in page
    assert not Invitation.objects.exists()
    assert not Membership.objects.filter(tenant=people["a"], user__username="dnaa").exists()


def test_the_api_refuses_an_unknown_username_in_the_same_words(api, people):
    response = api(people["alice"]).post(
        "/api/v1/tenants/tenant-a/members/", {"username": "dnaa", "role": "member"}, format="json"
    )
    assert response.status_code == 400
    assert response.json()["detail"] == REFUSAL
    assert not Invitation.objects.exists()


def test_an_e_mail_address_without_an_account_is_invited_through_the_portal_and_the_api(client, api, people):
    client.force_login(people["alice"])
    response = client.post("/tenants/tenant-a/members/", {"username": "dana@example.com", "role": "member"})
    assert response.status_code == 302
    assert Invitation.objects.get(login="dana@example.com").role == "member"

    response = api(people["alice"]).post(
        "/api/v1/tenants/tenant-a/members/", {"username": "erin@example.com", "role": "viewer"}, format="json"
    )
    assert response.status_code == 202
    assert response.json()["login"] == "erin@example.com"
    assert response.json()["role"] == "viewer"
    assert Invitation.objects.get(login="erin@example.com").role == "viewer"


def test_an_e_mail_address_of_an_account_adds_that_account_through_the_api(api, people):
    people["charlie"].email = "charlie@example.com"
    people["charlie"].save()
    response = api(people["alice"]).post(
        "/api/v1/tenants/tenant-a/members/",
        {"username": "Charlie@Example.com", "role": "viewer"},
        format="json",
    )
    assert response.status_code == 201
    assert response.json()["username"] == "charlie"
    assert not Invitation.objects.exists()


def test_a_viewer_learns_nothing_about_who_has_an_account(api, people):
    for login in ("dnaa", "charlie"):
        response = api(people["bob"]).post(
            "/api/v1/tenants/tenant-a/members/", {"username": login, "role": "viewer"}, format="json"
        )
        assert response.status_code == 403, login
