"""Bad input to SCIM is a SCIM error saying what was wrong, never a 500, and changes nothing."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from tenants.scim.tests.helpers import ERROR_SCHEMA, GROUP_SCHEMA, USER_SCHEMA

SCHEMA = USER_SCHEMA.encode()
LONG_EMAIL = b"y" * 300 + b"@x.example"


@pytest.mark.parametrize(
    ("body", "status"),
    [
        (b"{not json", 400),
        (b"[" * 100_000 + b"]" * 100_000, 400),
        (b'{"schemas": ["%s"], "userName": "nul\\u0000"}' % USER_SCHEMA.encode(), 400),
        (
            b'{"schemas": ["%s"], "userName": "a\\\\u0000"}' % USER_SCHEMA.encode(),
            400,
        ),  # a\u0000 is no username
        (b'{"schemas": ["%s"], "userName": 7}' % USER_SCHEMA.encode(), 400),
        (b'{"schemas": ["%s"], "userName": "%s"}' % (USER_SCHEMA.encode(), b"x" * 151), 400),
        (
            b'{"schemas": ["%s"], "userName": "ok", "emails": [{"value": "%s@x.example"}]}'
            % (USER_SCHEMA.encode(), b"y" * 300),
            400,
        ),
        (b'{"schemas": ["urn:nope"], "userName": "ok"}', 400),
        (b'{"schemas": ["%s"], "userName": "ok", "externalId": "%s"}' % (SCHEMA, b"e" * 256), 400),
        (b'{"schemas": ["%s"], "userName": "ok", "displayName": "%s"}' % (SCHEMA, b"d" * 256), 400),
        (b"\xff\xfe", 400),
    ],
)
def test_a_malformed_user_is_a_scim_400(scim, body, status):
    response = scim.client.post("/scim/v2/Users", data=body, content_type="application/scim+json")

    assert response.status_code == status, response.content[:300]
    assert response.json()["schemas"] == [ERROR_SCHEMA]
    assert not User.objects.filter(scim__isnull=False).exists()


def test_a_body_that_is_not_json_is_415_and_an_unknown_method_405(scim):
    response = scim.client.post(
        "/scim/v2/Users", data="userName=ada", content_type="application/x-www-form-urlencoded"
    )
    assert response.status_code == 415
    assert response.json()["schemas"] == [ERROR_SCHEMA]
    status, body = scim.call("PATCH", "Users", {})
    assert status == 405
    assert body["schemas"] == [ERROR_SCHEMA]
    status, body = scim.call("POST", "Bulk", {})
    assert status == 501


def test_an_overlong_group_name_is_a_scim_400(scim):
    status, body = scim.call("POST", "Groups", {"schemas": [GROUP_SCHEMA], "displayName": "g" * 256})
    assert status == 400
    assert body["scimType"] == "invalidValue"
    assert "at most 255" in body["detail"]
