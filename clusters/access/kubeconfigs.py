"""Handing people kubeconfigs of their tenant's cluster, each download audited (docs/kubernetes.md).

Everyone whose role reaches the cluster (owner, admin, member, viewer) gets a kubeconfig of their own, with no
shared secret in it:

- with single sign-on (`OIDC_ISSUER`), it runs `kubectl oidc-login` (kubelogin) against gpucloud's provider
  for the CLI's client id (`OIDC_KUBERNETES_CLIENT_ID`); the vCluster's API server trusts that provider;
- without it, it carries a short-lived token (TokenRequest, CLUSTER_TOKEN_TTL) of the person's own
  ServiceAccount inside the vCluster, which the access pass deletes when they leave.

The vCluster's admin kubeconfig (the `vc-<name>` secret) is break-glass: owners only, audited as such.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

import yaml
from django.conf import settings

from clusters.access import rbac as access
from clusters.drivers.kubeconfig import rewrite_server
from clusters.profiles import profile_of
from clusters.render.access import CLUSTER_ROLES, account_name
from core import audit
from core.audit import Actor
from fleet.models import HostCluster
from gpucloud.errors import Conflict, ServiceError
from gpucloud.kube.api import NotFound
from gpucloud.kube.errors import DriverError
from tenants.models import Membership, Tenant, TenantCluster
from tenants.services.roles import require


class ClusterUnavailable(ServiceError):
    """The tenant's cluster could not be asked for a credential just now; trying again later may work."""

    status = 503
    type = "cluster-unavailable"
    title = "The tenant cluster cannot be reached"


def _document(name: str, server: str, ca: str, user: dict[str, Any]) -> str:
    cluster: dict[str, Any] = {"server": server}
    if ca:
        cluster["certificate-authority-data"] = ca
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": name, "cluster": cluster}],
            "users": [{"name": name, "user": user}],
            "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
            "current-context": name,
        },
        sort_keys=False,
    )


def kubelogin_user() -> dict[str, Any]:
    """The kubeconfig user that signs in through gpucloud's provider with `kubectl oidc-login` (kubelogin)."""
    return {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": "kubectl",
            "args": [
                "oidc-login",
                "get-token",
                f"--oidc-issuer-url={settings.OIDC_ISSUER}",
                f"--oidc-client-id={settings.OIDC_KUBERNETES_CLIENT_ID}",
                "--oidc-extra-scope=email",
                "--oidc-extra-scope=groups",
            ],
            # client-go rejects a v1 exec entry without it; kubelogin opens a browser when it can.
            "interactiveMode": "IfAvailable",
        }
    }


def _ready_cluster(tenant: Tenant) -> TenantCluster:
    cluster = tenant.cluster
    if cluster.state not in (TenantCluster.State.READY, TenantCluster.State.SUSPENDED):
        raise Conflict(
            f"the cluster of {tenant.slug} is {cluster.state}; its kubeconfig exists once it is ready"
        )
    return cluster


def _membership(actor: Actor, tenant: Tenant) -> Membership:
    membership = (
        Membership.objects.filter(tenant=tenant, user=actor.user).select_related("user").first()
        if actor.user is not None
        else None
    )
    if membership is None or membership.role not in CLUSTER_ROLES:
        raise Conflict(
            f"cluster access follows roles in {tenant.slug} (owner, admin, member, viewer) and you hold none "
            "there; an owner may download the break-glass admin kubeconfig"
        )
    return membership


def _simulated_token(tenant: Tenant, membership: Membership) -> str:
    """The simulated cluster's credential: one per person and membership, never shared."""
    text = f"sim:{tenant.public_id}:{membership.user_id}:{membership.created_at.isoformat()}"
    return hmac.new(settings.SECRET_KEY.encode(), text.encode(), hashlib.sha256).hexdigest()


def _service_account_token(tenant: Tenant, cluster: TenantCluster, membership: Membership) -> tuple[str, str]:
    """A token of the person's ServiceAccount; the access pass runs first when it does not exist yet."""
    name = account_name(membership.user_id, membership.user.get_username())
    for attempt in (1, 2):
        api = access.vcluster_api(cluster)
        try:
            return access.request_token(api, name, settings.CLUSTER_TOKEN_TTL)
        except NotFound:
            if attempt == 2 or not access.sync_access(tenant):
                break  # a membership this moment, not reflected yet: the caller is told to try again
        finally:
            api.api_client.close()
    raise Conflict(
        f"your access to the cluster of {tenant.slug} is being set up "
        f"({cluster.access_message or 'pending'}); "
        "try again in a minute"
    )


def tenant_kubeconfig(*, actor: Actor, tenant: Tenant) -> str:
    """The caller's own kubeconfig of the tenant's cluster, with no shared secret in it; audited."""
    require(actor, tenant, "kubeconfig.download", "downloading a kubeconfig")
    cluster = _ready_cluster(tenant)
    membership = _membership(actor, tenant)
    host_cluster = cluster.host_cluster
    simulated = host_cluster.driver == HostCluster.Driver.SIMULATED
    name = f"gpucloud-{tenant.slug}"
    after: dict[str, Any] = {"host_cluster": host_cluster.name, "role": membership.role}
    try:
        server = cluster.endpoint if simulated else profile_of(host_cluster).endpoint(tenant.slug)
        ca = "" if simulated else access.certificate_authority(access.admin_kubeconfig_of(cluster))
        if access.cluster_mode() == "oidc":
            user, after["credential"] = kubelogin_user(), "oidc"
        elif simulated:
            user, after["credential"] = {"token": _simulated_token(tenant, membership)}, "simulated"
        else:
            token, expires = _service_account_token(tenant, cluster, membership)
            user = {"token": token}
            after.update(credential="serviceaccount", expires_at=expires)
    except DriverError as exc:
        raise ClusterUnavailable(f"the cluster of {tenant.slug} could not be reached: {exc}") from None
    audit.record(
        actor,
        "kubeconfig.download",
        object_type="tenant_cluster",
        object_id=tenant.public_id,
        tenant=tenant,
        after=after,
    )
    return _document(name, server, ca, user)


def admin_kubeconfig(*, actor: Actor, tenant: Tenant) -> str:
    """Break-glass: the vCluster's own admin kubeconfig (`vc-<name>`), for owners only; audited as such."""
    require(actor, tenant, "kubeconfig.admin", "downloading the break-glass admin kubeconfig")
    cluster = _ready_cluster(tenant)
    host_cluster = cluster.host_cluster
    if host_cluster.driver == HostCluster.Driver.SIMULATED:
        text = _document(
            f"gpucloud-{tenant.slug}-admin",
            cluster.endpoint,
            "",
            {"token": _simulated_admin_token(tenant)},
        )
    else:
        try:
            text = rewrite_server(
                access.admin_kubeconfig_of(cluster), profile_of(host_cluster).endpoint(tenant.slug)
            )
        except DriverError as exc:
            raise ClusterUnavailable(f"the cluster of {tenant.slug} could not be reached: {exc}") from None
    audit.record(
        actor,
        "kubeconfig.break_glass",
        object_type="tenant_cluster",
        object_id=tenant.public_id,
        tenant=tenant,
        after={"host_cluster": host_cluster.name, "namespace": cluster.namespace, "credential": "admin"},
    )
    return text


def _simulated_admin_token(tenant: Tenant) -> str:
    text = f"sim-admin:{tenant.public_id}"
    return hmac.new(settings.SECRET_KEY.encode(), text.encode(), hashlib.sha256).hexdigest()
