"""The RBAC objects inside a tenant's vCluster, and the vCluster values that decide sleep and OIDC."""

from clusters.render import ClusterProfile
from clusters.render.access import AccessSpec, Person, account_name, render_access
from clusters.render.profile import OidcSettings
from clusters.render.vcluster import render_values

PEOPLE = (
    Person("u1-ann", "ann", "owner", "ann-sub"),
    Person("u2-ben", "ben", "viewer", "ben-sub"),
    Person("u3-cas", "cas", "billing", "cas-sub"),
)


def test_account_names_are_dns_labels_unique_by_user_id():
    assert account_name(7, "Ann.Smith@corp.example") == "u7-ann-smith-corp-example"
    assert account_name(8, "@@@") == "u8"
    assert len(account_name(9, "x" * 200)) <= 63


def test_service_accounts_mode_makes_one_account_and_binding_per_person_with_cluster_access():
    objects = render_access(AccessSpec("acme", "serviceaccounts", PEOPLE))
    kinds = [(o["kind"], o["metadata"]["name"]) for o in objects]
    assert kinds[0] == ("Namespace", "gpucloud-access")  # first: the accounts live in it
    assert ("ServiceAccount", "u3-cas") not in kinds  # billing: nothing inside the cluster
    bindings = {o["metadata"]["name"]: o for o in objects if o["kind"] == "ClusterRoleBinding"}
    assert {n: b["roleRef"]["name"] for n, b in bindings.items()} == {
        "gpucloud-sa-u1-ann": "cluster-admin",
        "gpucloud-sa-u2-ben": "view",
    }
    assert all(o["metadata"]["labels"]["gpucloud.io/tenant"] == "acme" for o in objects)


def test_oidc_mode_binds_the_tenant_groups_and_people_given_a_role_by_name():
    spec = AccessSpec("acme", "oidc", PEOPLE[:2], group_pattern="team-{tenant}-{role}", prefix="sso:")
    bindings = {o["metadata"]["name"]: o for o in render_access(spec)}
    assert bindings["gpucloud-group-member"]["subjects"][0]["name"] == "sso:team-acme-member"
    assert bindings["gpucloud-group-member"]["roleRef"]["name"] == "edit"
    assert bindings["gpucloud-user-u2-ben"]["subjects"][0] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "User",
        "name": "sso:ben-sub",
    }
    assert "gpucloud-group-billing" not in bindings


def test_the_digest_changes_with_any_role_and_only_then():
    spec = AccessSpec("acme", "serviceaccounts", PEOPLE)
    assert spec.digest() == AccessSpec("acme", "serviceaccounts", PEOPLE).digest()
    changed = (PEOPLE[0], Person("u2-ben", "ben", "member", "ben-sub"), PEOPLE[2])
    assert spec.digest() != AccessSpec("acme", "serviceaccounts", changed).digest()


def test_vcluster_values_carry_the_oidc_flags_and_the_tenants_own_sleep_delay(make_tenant):
    oidc = OidcSettings(issuer="https://sso.example/realms/x", client_id="cli")
    values = render_values(make_tenant(sleep_after_inactivity="2h"), ClusterProfile(oidc=oidc))
    args = values["controlPlane"]["distro"]["k8s"]["apiServer"]["extraArgs"]
    assert "--oidc-issuer-url=https://sso.example/realms/x" in args
    assert "--oidc-groups-prefix=oidc:" in args
    assert values["controlPlane"]["advanced"]["virtualScheduler"]["enabled"] is False  # kept
    assert values["sleep"] == {"auto": {"afterInactivity": "2h"}}
    asleep = render_values(make_tenant(sleep_after_inactivity="2h", asleep=True), ClusterProfile())
    assert asleep["sleep"] == {"auto": {"afterInactivity": "1m"}}
    assert "distro" not in asleep["controlPlane"]
    assert render_values(make_tenant(), ClusterProfile(sleep_after_inactivity="3h"))["sleep"]["auto"] == {
        "afterInactivity": "3h"
    }
