"""SCIM Users: accounts as the identity provider provisions them, found by filters, changed by PATCH as
Okta and Entra ID send it."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User

from core.models import AuditEvent
from tenants.models import ScimUser
from tenants.scim.tests.helpers import ERROR_SCHEMA, USER_SCHEMA

ENTERPRISE = "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User"


def test_a_provisioned_person_gets_an_account_without_a_password_audited_as_the_token(scim):
    body = scim.user(
        "ada@corp.example",
        externalId="00u1ada",
        name={"givenName": "Ada", "familyName": "Lovelace"},
        emails=[{"value": "ada@corp.example", "type": "work", "primary": True}],
        title="Analyst",
        password="never-kept",
    )

    ada = User.objects.get(username="ada@corp.example")
    assert not ada.has_usable_password()
    assert ada.is_active
    assert (ada.email, ada.first_name, ada.last_name) == ("ada@corp.example", "Ada", "Lovelace")
    assert body["id"].startswith("scu_")
    assert body["externalId"] == "00u1ada"
    assert body["title"] == "Analyst"
    assert "password" not in body
    assert "never-kept" not in str(ScimUser.objects.get(user=ada).attributes)
    row = AuditEvent.objects.get(action="user.create", object_id="ada@corp.example")
    assert row.actor_label.endswith("(SCIM token okta)")
    assert row.actor.username.startswith("scim.")


def test_a_taken_or_malformed_user_name_is_a_scim_error_saying_so(scim, make_user):
    make_user("grace")
    status, body = scim.call("POST", "Users", {"schemas": [USER_SCHEMA], "userName": "GRACE"})
    assert status == 409
    assert body["schemas"] == [ERROR_SCHEMA]
    assert body["scimType"] == "uniqueness"
    assert "taken" in body["detail"]

    status, body = scim.call("POST", "Users", {"schemas": [USER_SCHEMA], "userName": "two words"})
    assert status == 400
    assert body["scimType"] == "invalidValue"
    assert "not a username" in body["detail"]

    status, body = scim.call("POST", "Users", {"schemas": [USER_SCHEMA], "userName": "x", "shoeSize": 4})
    assert status == 400
    assert body["schemas"] == [ERROR_SCHEMA]
    assert not User.objects.filter(username__in=["two words", "x"]).exists()  # nothing half-written


@pytest.fixture
def directory(scim):
    people: dict[str, dict[str, Any]] = {
        "ada": {
            "externalId": "ext-ada",
            "displayName": "Ada Lovelace",
            "emails": [{"value": "ada@corp.example"}],
        },
        "alan": {
            "externalId": "ext-alan",
            "displayName": "Alan Turing",
            "emails": [{"value": "alan@lab.example"}],
        },
        "grace": {
            "displayName": "Grace Hopper",
            "active": False,
            "emails": [{"value": "grace@corp.example"}],
        },
    }
    return {name: scim.user(name, **attributes)["id"] for name, attributes in people.items()}


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ('userName eq "ADA"', {"ada"}),
        ('userName sw "a"', {"ada", "alan"}),
        ('userName co "ra"', {"grace"}),
        ('emails co "@corp.example"', {"ada", "grace"}),
        ('emails[value ew "lab.example"]', {"alan"}),
        ('emails.value eq "grace@corp.example"', {"grace"}),
        ('externalId eq "ext-alan"', {"alan"}),
        ('externalId eq "EXT-ALAN"', set()),  # externalId is case-exact
        ("externalId pr", {"ada", "alan"}),
        ('displayName co "turing"', {"alan"}),
        ("active eq false", {"grace"}),
        ('active eq "True"', {"ada", "alan"}),  # Entra ID's string booleans
        ('userName sw "a" and displayName co "Love"', {"ada"}),
        ('externalId eq "ext-ada" or emails co "grace"', {"ada", "grace"}),
        ("not (externalId pr)", {"grace"}),
        ('urn:ietf:params:scim:schemas:core:2.0:User:userName eq "alan"', {"alan"}),
    ],
)
def test_users_are_filtered_by_the_database(scim, directory, query, expected):
    status, body = scim.call("GET", "Users", QUERY_STRING=f"filter={query}")
    assert status == 200, body
    assert {r["userName"] for r in body["Resources"]} == expected
    assert body["totalResults"] == len(expected)


def test_a_filter_on_an_attribute_that_is_not_kept_is_refused_naming_those_that_are(scim, directory):
    status, body = scim.call("GET", "Users", QUERY_STRING='filter=title eq "x"')
    assert status == 400
    assert body["scimType"] == "invalidFilter"
    assert "title" in body["detail"]
    assert "userName" in body["detail"].replace("username", "userName")

    status, body = scim.call("GET", "Users", QUERY_STRING="filter=userName eq")
    assert status == 400
    assert body["scimType"] == "invalidFilter"


def test_pages_come_by_start_index_and_count(scim, directory):
    status, body = scim.call("GET", "Users", QUERY_STRING="startIndex=2&count=1")
    assert status == 200
    assert (body["totalResults"], body["itemsPerPage"], body["startIndex"]) == (3, 1, 2)
    assert [r["id"] for r in body["Resources"]] == [directory["alan"]]


def test_patch_deactivates_as_okta_and_entra_send_it(scim, directory):
    ada, alan, grace = directory["ada"], directory["alan"], directory["grace"]
    status, body = scim.patch(f"Users/{ada}", {"op": "replace", "path": "active", "value": False})
    assert status == 200
    assert body["active"] is False  # Okta
    status, body = scim.patch(f"Users/{alan}", {"op": "Replace", "value": {"active": "False"}})
    assert status == 200
    assert body["active"] is False  # Entra ID: no path, a capital R, a string boolean
    status, body = scim.patch(f"Users/{grace}", {"op": "replace", "value": {"active": True}})
    assert status == 200
    assert body["active"] is True
    active = dict(User.objects.filter(scim__isnull=False).values_list("username", "is_active"))
    assert active == {"ada": False, "alan": False, "grace": True}
    assert {"ada", "alan"} == set(
        AuditEvent.objects.filter(action="user.deactivate").values_list("object_id", flat=True)
    )
    assert AuditEvent.objects.filter(action="user.activate", object_id="grace").exists()


def test_patch_adds_replaces_and_removes_with_and_without_paths(scim, directory):
    ada = directory["ada"]
    status, body = scim.patch(
        f"Users/{ada}",
        {"op": "replace", "path": "name.givenName", "value": "Augusta"},
        {"op": "add", "path": 'emails[type eq "work"].value', "value": "augusta@corp.example"},
        {"op": "add", "path": f"{ENTERPRISE}:department", "value": "Engines"},
        {"op": "replace", "value": {"userName": "augusta", "externalId": "ext-augusta"}},
        {"op": "remove", "path": "displayName"},
    )
    assert status == 200, body
    assert body["userName"] == "augusta"
    assert body["externalId"] == "ext-augusta"
    assert "displayName" not in body
    assert body[ENTERPRISE]["department"] == "Engines"
    user = User.objects.get(scim__public_id=ada)
    assert (user.username, user.first_name) == ("augusta", "Augusta")
    assert user.email == "ada@corp.example"  # the primary address is still the first one
    status, body = scim.patch(f"Users/{ada}", {"op": "remove", "path": 'emails[value eq "ada@corp.example"]'})
    assert status == 200
    assert [e["value"] for e in body["emails"]] == ["augusta@corp.example"]
    assert User.objects.get(pk=user.pk).email == "augusta@corp.example"
    assert AuditEvent.objects.filter(action="user.update", object_id="augusta").count() == 2


def test_a_bad_patch_changes_nothing_and_says_why(scim, directory):
    ada = directory["ada"]
    status, body = scim.patch(
        f"Users/{ada}",
        {"op": "replace", "path": "name.givenName", "value": "Changed"},
        {"op": "replace", "path": "userName", "value": "alan"},  # taken
    )
    assert status == 409
    assert body["scimType"] == "uniqueness"
    assert User.objects.get(scim__public_id=ada).first_name == ""
    status, body = scim.patch(f"Users/{ada}", {"op": "explode", "path": "active"})
    assert status == 400
    assert body["schemas"] == [ERROR_SCHEMA]
    status, body = scim.patch(
        "Users/scu_doesnotexist0000", {"op": "replace", "path": "active", "value": False}
    )
    assert status == 404
    assert body["schemas"] == [ERROR_SCHEMA]


def test_a_stale_etag_is_refused_and_a_fresh_one_accepted(scim, directory):
    ada = directory["ada"]
    response = scim.client.get(f"/scim/v2/Users/{ada}")
    etag = response["ETag"]
    assert etag.startswith('W/"')
    scim.patch(f"Users/{ada}", {"op": "replace", "path": "displayName", "value": "Countess"})
    status, _ = scim.call(
        "PATCH",
        f"Users/{ada}",
        {
            "schemas": ["urn:ietf:params:scim:api:messages:2.0:PatchOp"],
            "Operations": [{"op": "replace", "path": "displayName", "value": "Late"}],
        },
        HTTP_IF_MATCH=etag,
    )
    assert status == 412
    assert scim.call("GET", f"Users/{ada}")[1]["displayName"] == "Countess"


def test_put_replaces_the_person(scim, directory):
    ada = directory["ada"]
    status, body = scim.call(
        "PUT", f"Users/{ada}", {"schemas": [USER_SCHEMA], "userName": "ada", "name": {"familyName": "King"}}
    )
    assert status == 200, body
    assert "emails" not in body
    assert "displayName" not in body
    assert body["name"] == {"familyName": "King"}
    assert User.objects.get(username="ada").email == ""
