"""Issue 16: people inside tenant clusters, without single sign-on.

Two stand-ins (tests/kube_emulator.py): the host cluster, and a second one playing the tenant's vCluster API,
whose address and admin token the `vc-<name>` secret on the host names. Each member's kubeconfig carries a
token of their own ServiceAccount; the stand-in authenticates it and authorises it through the RBAC objects
gpucloud wrote, and refuses it once the ServiceAccount is deleted.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from django.contrib.auth.models import User

from clusters.access import rbac as access
from clusters.reconcile import tenants as reconcile
from clusters.render.access import account_name
from clusters.tests.conftest import configmap, status_of
from core.audit import Actor
from core.models import AuditEvent
from gpucloud.kube.api import KubeApi, RetryPolicy, api_client_from_kubeconfig
from tenants.models import Membership, Tenant
from tenants.services import members
from tests.kube_emulator import VCLUSTER_ADMIN_TOKEN, RunningEmulator, start_virtual_cluster

RBAC = "rbac.authorization.k8s.io/v1"
ONCE = RetryPolicy(attempts=1, timeout_seconds=5.0)


@pytest.fixture
def vcluster() -> Iterator[RunningEmulator]:
    emulator = start_virtual_cluster()
    emulator.put_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
    yield emulator
    emulator.stop()


@pytest.fixture
def vision(host, kube_emulator, vcluster, api, admin, make_user) -> Tenant:
    """Tenant `vision` ready on gpu-east; admin owns it, alice is a member and bob a viewer."""
    client = api(admin)
    created = client.post("/api/v1/tenants/", {"slug": "vision", "host_cluster": "gpu-east"}, format="json")
    assert created.status_code == 201, created.json()
    for name, role in (("alice", "member"), ("bob", "viewer"), ("carol", "billing")):
        make_user(name)
        client.post("/api/v1/tenants/vision/members/", {"username": name, "role": role}, format="json")
    reconcile.reconcile_host_cluster(host)
    kube_emulator.make_vcluster_ready(
        "tenant-vision", "vision", server=vcluster.url, token=VCLUSTER_ADMIN_TOKEN
    )
    reconcile.reconcile_host_cluster(host)
    return Tenant.objects.get(slug="vision")


def access_pass(tenant: Tenant) -> int:
    return access.sync_due(access.tenants_of(tenant.cluster.host_cluster_id))


def as_person(kubeconfig: str, vcluster: RunningEmulator) -> KubeApi:
    """Use a downloaded kubeconfig, with the tenant's external endpoint resolved to the stand-in."""
    document = yaml.safe_load(kubeconfig)
    document["clusters"][0]["cluster"]["server"] = vcluster.url
    document["clusters"][0]["cluster"].pop("certificate-authority-data", None)
    return KubeApi(api_client_from_kubeconfig(yaml.safe_dump(document)), ONCE)


def download(api: Any, user: User) -> Any:
    return api(user).get("/api/v1/tenants/vision/kubeconfig/")


def test_each_role_gets_its_own_service_account_bound_to_its_cluster_role(vision, vcluster):
    access_pass(vision)

    accounts = {a["metadata"]["name"]: a for a in vcluster.objects_of("v1", "ServiceAccount")}
    ids = {u.username: u.pk for u in User.objects.all()}
    assert set(accounts) == {account_name(ids[n], n) for n in ("admin", "alice", "bob")}  # billing: none
    bindings = {b["metadata"]["name"]: b for b in vcluster.objects_of(RBAC, "ClusterRoleBinding")}
    roles = {name: b["roleRef"]["name"] for name, b in bindings.items()}
    assert roles == {
        f"gpucloud-sa-{account_name(ids['admin'], 'admin')}": "cluster-admin",
        f"gpucloud-sa-{account_name(ids['alice'], 'alice')}": "edit",
        f"gpucloud-sa-{account_name(ids['bob'], 'bob')}": "view",
    }
    (subject,) = bindings[f"gpucloud-sa-{account_name(ids['bob'], 'bob')}"]["subjects"]
    assert subject == {
        "kind": "ServiceAccount",
        "name": account_name(ids["bob"], "bob"),
        "namespace": "gpucloud-access",
    }
    assert all(b["metadata"]["labels"]["gpucloud.io/tenant"] == "vision" for b in bindings.values())

    writes = vcluster.writes
    vision.cluster.refresh_from_db()
    assert access.sync_access(vision)
    assert vcluster.writes == writes  # unchanged: no writes


def test_a_members_kubeconfig_holds_a_token_of_their_own_which_stops_working_when_they_leave(
    vision, vcluster, api, admin
):
    alice = User.objects.get(username="alice")
    response = download(api, alice)
    assert response.status_code == 200, response.content
    document = yaml.safe_load(response.content)
    user = document["users"][0]["user"]
    assert set(user) == {"token"}
    assert VCLUSTER_ADMIN_TOKEN not in response.content.decode()
    assert document["clusters"][0]["cluster"]["server"] == "https://vision.gpu-east.gpucloud.internal"
    event = AuditEvent.objects.filter(action="kubeconfig.download").latest("created_at")
    assert event.actor == alice
    assert event.after["credential"] == "serviceaccount"
    assert event.after["expires_at"]

    kube = as_person(response.content.decode(), vcluster)
    review = kube.request("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", body={})
    assert review["status"]["userInfo"]["username"] == (
        f"system:serviceaccount:gpucloud-access:{account_name(alice.pk, 'alice')}"
    )
    assert status_of(kube.apply, "/api/v1/namespaces/default/configmaps/mine", configmap("mine")) == 200
    assert (
        status_of(kube.get, "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings") == 403
    )  # edit, not admin

    membership = Membership.objects.get(tenant=vision, user=alice)
    members.remove_member(actor=Actor.of(admin), tenant=vision, membership=membership)
    assert api(admin).get("/api/v1/tenants/vision/").json()["cluster"]["access"]["in_sync"] is False
    access_pass(vision)

    assert status_of(kube.get, "/api/v1/namespaces/default/pods") == 401  # the ServiceAccount is gone
    assert (
        vcluster.get_object("v1", "ServiceAccount", account_name(alice.pk, "alice"), "gpucloud-access")
        is None
    )
    cluster = api(admin).get("/api/v1/tenants/vision/").json()["cluster"]
    assert cluster["access"]["in_sync"] is True
    assert cluster["access"]["synced_at"]


def test_a_viewer_gets_a_kubeconfig_that_reads_but_cannot_write_until_promoted(vision, vcluster, api, admin):
    bob = User.objects.get(username="bob")
    response = download(api, bob)
    assert response.status_code == 200, response.content
    kube = as_person(response.content.decode(), vcluster)
    assert status_of(kube.get, "/api/v1/namespaces/default/pods") == 200
    assert status_of(kube.apply, "/api/v1/namespaces/default/configmaps/x", configmap("x")) == 403

    members.add_member(actor=Actor.of(admin), tenant=vision, username="bob", role="member")
    assert status_of(kube.apply, "/api/v1/namespaces/default/configmaps/x", configmap("x")) == 403  # not yet
    access_pass(vision)
    assert status_of(kube.apply, "/api/v1/namespaces/default/configmaps/x", configmap("x")) == 200


def test_billing_and_outsiders_get_no_kubeconfig(vision, api, make_user):
    carol = User.objects.get(username="carol")
    assert download(api, carol).status_code == 403
    assert download(api, make_user("mallory")).status_code == 404


def test_a_member_added_just_now_gets_a_kubeconfig_at_once(vision, vcluster, api, admin, make_user):
    access_pass(vision)
    dave = make_user("dave")
    members.add_member(actor=Actor.of(admin), tenant=vision, username="dave", role="member")
    response = download(api, dave)  # the access pass runs for the download
    assert response.status_code == 200, response.content
    assert vcluster.get_object("v1", "ServiceAccount", account_name(dave.pk, "dave"), "gpucloud-access")


def test_the_admin_kubeconfig_is_break_glass_for_owners_and_audited_as_such(vision, vcluster, api, admin):
    bob = User.objects.get(username="bob")
    assert api(bob).get("/api/v1/tenants/vision/kubeconfig/admin/").status_code == 403
    response = api(admin).get("/api/v1/tenants/vision/kubeconfig/admin/")
    assert response.status_code == 200
    assert VCLUSTER_ADMIN_TOKEN in response.content.decode()
    event = AuditEvent.objects.get(action="kubeconfig.break_glass")
    assert event.actor == admin
    assert event.tenant == vision


def test_bindings_gpucloud_did_not_make_are_left_alone(vision, vcluster):
    theirs = {
        "apiVersion": RBAC,
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "their-own"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [{"kind": "Group", "name": "someone"}],
    }
    vcluster.put_object(theirs)
    access_pass(vision)
    assert vcluster.get_object(RBAC, "ClusterRoleBinding", "their-own") is not None


def test_an_unreachable_vcluster_is_reported_on_the_tenant_and_retried(
    vision, vcluster, api, admin, settings
):
    settings.CLUSTER_ACCESS_RETRY = 0
    vcluster.stop()
    assert access_pass(vision) == 0
    cluster = api(admin).get("/api/v1/tenants/vision/").json()["cluster"]
    assert cluster["access"]["in_sync"] is False
    assert "not applied yet" in cluster["access"]["message"]
    assert download(api, User.objects.get(username="alice")).status_code == 503
