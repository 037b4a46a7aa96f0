"""Issue 16 with single sign-on: each vCluster's API server trusts gpucloud's OpenID provider.

A real provider (npm oidc-provider, tests/oidc/) issues ID tokens for the CLI's public client, got as
`kubectl oidc-login` gets them; the vCluster stand-in checks them as kube-apiserver's `--oidc-*` flags would
and authorises through the RBAC objects gpucloud wrote there: the tenant groups and the people given a role
by hand.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from clusters.access import rbac as access
from clusters.reconcile import tenants as reconcile
from clusters.render.access import account_name
from clusters.tests.conftest import configmap, status_of
from core.audit import Actor
from core.models import AuditEvent
from gpucloud.kube.api import KubeApi, RetryPolicy, api_client_for_url
from tenants.models import Identity, Membership, Tenant
from tenants.services import lifecycle, members
from tests.kube_emulator import VCLUSTER_ADMIN_TOKEN, OidcIssuer, RunningEmulator, start_virtual_cluster
from tests.sso import CLI_CLIENT_ID, Provider, kubelogin_id_token

RBAC = "rbac.authorization.k8s.io/v1"
ONCE = RetryPolicy(attempts=1, timeout_seconds=10.0)


@pytest.fixture
def cluster_sso(sso_on: Provider, settings: Any) -> Provider:
    settings.OIDC_KUBERNETES_CLIENT_ID = CLI_CLIENT_ID
    return sso_on


@pytest.fixture
def vcluster(cluster_sso: Provider) -> Iterator[RunningEmulator]:
    emulator = start_virtual_cluster(oidc=OidcIssuer(issuer=cluster_sso.issuer, client_id=CLI_CLIENT_ID))
    emulator.put_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
    yield emulator
    emulator.stop()


@pytest.fixture
def vision(cluster_sso, host, kube_emulator, vcluster, admin) -> Tenant:
    tenant = lifecycle.create_tenant(actor=Actor.of(admin), slug="vision", host_cluster=host)
    reconcile.reconcile_host_cluster(host)
    kube_emulator.make_vcluster_ready(
        "tenant-vision", "vision", server=vcluster.url, token=VCLUSTER_ADMIN_TOKEN
    )
    reconcile.reconcile_host_cluster(host)
    return Tenant.objects.get(pk=tenant.pk)


def as_token(vcluster: RunningEmulator, token: str) -> KubeApi:
    api_client = api_client_for_url(vcluster.url)
    api_client.configuration.api_key = {"authorization": f"Bearer {token}"}
    return KubeApi(api_client, ONCE)


def test_the_vcluster_api_server_trusts_the_provider_for_the_cli_client(vision, kube_emulator, cluster_sso):
    release = kube_emulator.get_object("helm.toolkit.fluxcd.io/v2", "HelmRelease", "vision", "tenant-vision")
    args = release["spec"]["values"]["controlPlane"]["distro"]["k8s"]["apiServer"]["extraArgs"]
    assert args == [
        f"--oidc-issuer-url={cluster_sso.issuer}",
        f"--oidc-client-id={CLI_CLIENT_ID}",
        "--oidc-username-claim=sub",
        "--oidc-username-prefix=oidc:",
        "--oidc-groups-claim=groups",
        "--oidc-groups-prefix=oidc:",
    ]


def test_tenant_groups_are_bound_and_a_token_from_the_provider_gets_its_role(vision, vcluster, cluster_sso):
    access.sync_access(vision)
    bindings = {b["metadata"]["name"]: b for b in vcluster.objects_of(RBAC, "ClusterRoleBinding")}
    assert {name: (b["roleRef"]["name"], b["subjects"][0]["name"]) for name, b in bindings.items()} == {
        "gpucloud-group-owner": ("cluster-admin", "oidc:gpucloud:vision:owner"),
        "gpucloud-group-admin": ("cluster-admin", "oidc:gpucloud:vision:admin"),
        "gpucloud-group-member": ("edit", "oidc:gpucloud:vision:member"),
        "gpucloud-group-viewer": ("view", "oidc:gpucloud:vision:viewer"),
    }

    cluster_sso.person("dana", ["gpucloud:vision:member"])
    cluster_sso.person("erin", ["gpucloud:vision:viewer"])
    cluster_sso.person("fred", ["gpucloud:other:owner"])
    dana = as_token(vcluster, kubelogin_id_token(cluster_sso, "dana"))
    review = dana.request("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", body={})
    assert review["status"]["userInfo"]["username"] == "oidc:dana"
    assert "oidc:gpucloud:vision:member" in review["status"]["userInfo"]["groups"]
    assert status_of(dana.apply, "/api/v1/namespaces/default/configmaps/d", configmap("d")) == 200
    erin = as_token(vcluster, kubelogin_id_token(cluster_sso, "erin"))
    assert status_of(erin.get, "/api/v1/namespaces/default/configmaps") == 200
    assert status_of(erin.apply, "/api/v1/namespaces/default/configmaps/e", configmap("e")) == 403
    fred = as_token(vcluster, kubelogin_id_token(cluster_sso, "fred"))
    assert status_of(fred.get, "/api/v1/namespaces/default/configmaps") == 403
    assert status_of(as_token(vcluster, "not-a-token").get, "/api/v1/namespaces") == 401


def test_people_given_a_role_by_hand_are_bound_by_name_and_unbound_when_removed(
    vision, vcluster, cluster_sso, admin, make_user
):
    gina = make_user("gina")
    Identity.objects.create(user=gina, issuer=cluster_sso.issuer, subject="gina")
    members.add_member(actor=Actor.of(admin), tenant=vision, username="gina", role="admin")
    cluster_sso.person("gina", [])  # no group at the provider: only the manual role gives her access
    token = as_token(vcluster, kubelogin_id_token(cluster_sso, "gina"))
    assert status_of(token.get, "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings") == 403  # not yet
    assert access.sync_due([vision])

    binding = vcluster.get_object(
        RBAC, "ClusterRoleBinding", f"gpucloud-user-{account_name(gina.pk, 'gina')}"
    )
    assert binding["roleRef"]["name"] == "cluster-admin"
    assert binding["subjects"] == [
        {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "oidc:gina"}
    ]
    assert status_of(token.get, "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings") == 200

    members.add_member(actor=Actor.of(admin), tenant=vision, username="gina", role="viewer")
    access.sync_due([Tenant.objects.get(pk=vision.pk)])
    assert status_of(token.get, "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings") == 403
    assert status_of(token.get, "/api/v1/namespaces/default/configmaps") == 200

    members.remove_member(
        actor=Actor.of(admin), tenant=vision, membership=Membership.objects.get(tenant=vision, user=gina)
    )
    access.sync_due([Tenant.objects.get(pk=vision.pk)])
    assert (
        vcluster.get_object(RBAC, "ClusterRoleBinding", f"gpucloud-user-{account_name(gina.pk, 'gina')}")
        is None
    )
    assert status_of(token.get, "/api/v1/namespaces/default/configmaps") == 403


def test_the_downloaded_kubeconfig_signs_in_with_kubelogin_and_holds_no_secret(
    vision, cluster_sso, api, admin, make_user
):
    hana = make_user("hana")
    members.add_member(actor=Actor.of(admin), tenant=vision, username="hana", role="viewer")
    response = api(hana).get("/api/v1/tenants/vision/kubeconfig/")
    assert response.status_code == 200, response.content
    document = yaml.safe_load(response.content)
    (user,) = document["users"]
    assert set(user["user"]) == {"exec"}
    exec_ = user["user"]["exec"]
    assert exec_["command"] == "kubectl"
    assert exec_["args"][:2] == ["oidc-login", "get-token"]
    assert f"--oidc-issuer-url={cluster_sso.issuer}" in exec_["args"]
    assert f"--oidc-client-id={CLI_CLIENT_ID}" in exec_["args"]
    assert exec_["apiVersion"] == "client.authentication.k8s.io/v1"
    assert exec_["interactiveMode"] == "IfAvailable"
    assert VCLUSTER_ADMIN_TOKEN not in response.content.decode()
    assert AuditEvent.objects.get(action="kubeconfig.download").after["credential"] == "oidc"
