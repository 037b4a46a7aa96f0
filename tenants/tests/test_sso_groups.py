"""Reading the groups claim into roles (tenants.sso.grants_from), and the example Keycloak realm."""

import json
import logging

from django.conf import settings as django_settings

from tenants.sso import grants_from, group_pattern


def test_groups_give_roles_in_existing_tenants_and_the_strongest_role_wins(make_tenant, settings):
    vision, speech = make_tenant("vision"), make_tenant("speech")
    settings.OIDC_ADMIN_GROUPS = ["platform"]

    grants = grants_from(["/gpucloud:vision:viewer", "gpucloud:vision:admin", "gpucloud:speech:billing"])

    assert grants.tenants == {vision: "admin", speech: "billing"}
    assert not grants.admin
    assert grants_from(["/platform"]).admin


def test_a_group_naming_a_missing_tenant_or_role_is_ignored_and_logged(make_tenant, caplog):
    make_tenant("vision")
    with caplog.at_level(logging.WARNING, logger="tenants.sso"):
        grants = grants_from(["gpucloud:ghost:owner", "gpucloud:vision:emperor"])

    assert not grants.any
    assert "'ghost' ignored: there is no such tenant" in caplog.text
    assert "names the role 'emperor', which does not exist" in caplog.text


def test_the_group_pattern_can_be_changed(make_tenant, settings):
    vision = make_tenant("vision")
    settings.OIDC_TENANT_GROUP_PATTERN = "team-{tenant}/{role}"

    assert group_pattern(settings.OIDC_TENANT_GROUP_PATTERN).match("team-vision/owner")
    assert grants_from(["team-vision/owner", "gpucloud:vision:viewer"]).tenants == {vision: "owner"}


def test_the_example_keycloak_realm_sends_groups_the_default_pattern_reads(db):
    realm = json.loads((django_settings.BASE_DIR / "deploy" / "keycloak" / "gpucloud-realm.json").read_text())
    client = next(c for c in realm["clients"] if c["clientId"] == "gpucloud")
    assert client["attributes"]["pkce.code.challenge.method"] == "S256"
    assert not client["publicClient"]
    assert "groups" in client["defaultClientScopes"]
    mapper = realm["clientScopes"][0]["protocolMappers"][0]["config"]
    assert mapper["claim.name"] == "groups"
    assert mapper["full.path"] == "false"
    pattern = group_pattern("gpucloud:{tenant}:{role}")
    tenant_groups = [g["name"] for g in realm["groups"] if g["name"].startswith("gpucloud:")]
    assert tenant_groups
    assert all(pattern.match(name) for name in tenant_groups)
