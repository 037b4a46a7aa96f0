"""SCIM Groups grant tenant roles by their names, as the groups claim of a sign-in does: a member of
`gpucloud:vision:member` is a member of vision, from the moment the provider says so until it says not."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from core.audit import Actor
from core.models import AuditEvent
from tenants import sso
from tenants.models import Identity, Membership, Tenant
from tenants.scim.tests.helpers import GROUP_SCHEMA
from tenants.services import members


def roles(username):
    rows = Membership.objects.filter(user__username=username).select_related("tenant")
    return {(m.tenant.slug, m.role, m.source) for m in rows}


@pytest.fixture
def team(scim, make_tenant, settings):
    settings.OIDC_ADMIN_GROUPS = ["gpucloud-admins"]
    make_tenant("vision"), make_tenant("speech")
    return {name: scim.user(name)["id"] for name in ("ada", "alan")}


def test_a_pushed_group_gives_its_members_the_role_it_names(scim, team):
    group = scim.group("gpucloud:vision:member", [team["ada"], team["alan"]])

    assert roles("ada") == roles("alan") == {("vision", "member", "sso")}
    assert [m["display"] for m in group["members"]] == ["ada", "alan"]
    assert AuditEvent.objects.filter(action="member.add", object_id="vision/ada").exists()
    assert AuditEvent.objects.get(action="group.create").after["added"] == ["ada", "alan"]


def test_removing_a_member_takes_the_role_away_at_once_as_okta_and_entra_send_it(scim, team):
    group = scim.group("gpucloud:vision:member", [team["ada"], team["alan"]])["id"]

    status, _ = scim.patch(f"Groups/{group}", {"op": "remove", "path": f'members[value eq "{team["ada"]}"]'})
    assert status == 200
    assert roles("ada") == set()  # Okta
    status, _ = scim.patch(
        f"Groups/{group}", {"op": "Remove", "path": "members", "value": [{"value": team["alan"]}]}
    )
    assert status == 200
    assert roles("alan") == set()  # Entra ID: the member to remove in `value`
    status, body = scim.patch(
        f"Groups/{group}", {"op": "add", "path": "members", "value": [{"value": team["ada"]}]}
    )
    assert status == 200
    assert roles("ada") == {("vision", "member", "sso")}
    assert [m["value"] for m in body["members"]] == [team["ada"]]


def test_renaming_or_deleting_a_group_moves_or_removes_what_it_gave(scim, team):
    group = scim.group("gpucloud:vision:viewer", [team["ada"]])["id"]
    scim.patch(f"Groups/{group}", {"op": "replace", "value": {"displayName": "gpucloud:speech:admin"}})
    assert roles("ada") == {("speech", "admin", "sso")}

    assert scim.call("DELETE", f"Groups/{group}")[0] == 204
    assert roles("ada") == set()
    assert scim.call("GET", f"Groups/{group}")[0] == 404


def test_an_admin_group_makes_platform_administrators_and_hand_granted_roles_stay(scim, team, admin):
    members.add_member(
        actor=Actor.of(admin),
        tenant=Tenant.objects.get(slug="speech"),
        username="ada",
        role="viewer",
    )
    group = scim.group("gpucloud-admins", [team["ada"]])["id"]
    assert User.objects.get(username="ada").is_staff

    scim.call("DELETE", f"Groups/{group}")
    assert not User.objects.get(username="ada").is_staff
    assert roles("ada") == {("speech", "viewer", "manual")}


def test_a_group_removed_over_scim_stops_counting_though_the_last_sign_in_claimed_it(scim, team, settings):
    settings.OIDC_ISSUER = "https://sso.example.com"
    ada = User.objects.get(username="ada")
    Identity.objects.create(
        user=ada, issuer=settings.OIDC_ISSUER, subject="s-ada", groups=["/gpucloud:vision:owner"]
    )
    group = scim.group("gpucloud:vision:owner", [team["ada"]])["id"]
    assert roles("ada") == {("vision", "owner", "sso")}

    scim.patch(f"Groups/{group}", {"op": "remove", "path": "members"})

    assert roles("ada") == set()
    assert Identity.objects.get(user=ada).groups == []
    sso.sync_grants(actor=Actor.system("test"), user=ada)  # and it stays gone
    assert roles("ada") == set()


def test_groups_are_filtered_by_name_and_member_and_names_are_unique(scim, team):
    vision = scim.group("gpucloud:vision:member", [team["ada"]])["id"]
    speech = scim.group("gpucloud:speech:member", [team["ada"], team["alan"]])["id"]

    status, body = scim.call("GET", "Groups", QUERY_STRING='filter=displayName eq "GPUCLOUD:VISION:MEMBER"')
    assert [g["id"] for g in body["Resources"]] == [vision]
    status, body = scim.call("GET", "Groups", QUERY_STRING=f'filter=members[value eq "{team["alan"]}"]')
    assert [g["id"] for g in body["Resources"]] == [speech]
    status, body = scim.call("GET", "Groups", QUERY_STRING="excludedAttributes=members")
    assert status == 200
    assert all("members" not in g for g in body["Resources"])

    status, body = scim.call(
        "POST", "Groups", {"schemas": [GROUP_SCHEMA], "displayName": "gpucloud:Vision:member"}
    )
    assert status == 409
    assert body["scimType"] == "uniqueness"
    status, body = scim.call(
        "POST",
        "Groups",
        {"schemas": [GROUP_SCHEMA], "displayName": "x", "members": [{"value": "scu_nobody"}]},
    )
    assert status == 400
    assert "scu_nobody" in body["detail"]
