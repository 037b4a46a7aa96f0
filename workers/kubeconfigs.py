"""Handing a tenant's kubeconfig to its members, with every download audited."""

from __future__ import annotations

import hashlib
import hmac

import yaml
from django.conf import settings

from gpucloud.errors import Conflict
from scheduling.models import HostCluster
from tenants import audit
from tenants.audit import Actor
from tenants.models import Tenant, TenantCluster
from tenants.services import require
from workers.drivers.kubernetes import read_kubeconfig
from workers.hostclusters import api_client_of, profile_of
from workers.reconcile import tenant_spec
from workers.render.vcluster import vcluster_name


def simulated_kubeconfig(tenant: Tenant) -> str:
    """A kubeconfig of the simulated cluster's shape, with a credential stable per tenant."""
    token = hmac.new(
        settings.SECRET_KEY.encode(), f"sim:{tenant.public_id}".encode(), hashlib.sha256
    ).hexdigest()
    name = f"gpucloud-{tenant.slug}"
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": name, "cluster": {"server": tenant.cluster.endpoint}}],
            "users": [{"name": name, "user": {"token": token}}],
            "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
            "current-context": name,
        },
        sort_keys=False,
    )


def tenant_kubeconfig(*, actor: Actor, tenant: Tenant) -> str:
    """The kubeconfig of the tenant's cluster, for its owners, admins and members; the download is audited."""
    require(actor, tenant, "kubeconfig.download", "downloading the kubeconfig")
    cluster = tenant.cluster
    if cluster.state not in (TenantCluster.State.READY, TenantCluster.State.SUSPENDED):
        raise Conflict(
            f"the cluster of {tenant.slug} is {cluster.state}; its kubeconfig exists once it is ready"
        )
    host_cluster = cluster.host_cluster
    if host_cluster.driver == HostCluster.Driver.SIMULATED:
        text = simulated_kubeconfig(tenant)
    else:
        api_client = api_client_of(host_cluster)
        try:
            spec = tenant_spec(tenant)
            endpoint = profile_of(host_cluster).endpoint(tenant.slug)
            text = read_kubeconfig(api_client, cluster.namespace, vcluster_name(spec), endpoint)
        finally:
            api_client.close()
    audit.record(
        actor,
        "kubeconfig.download",
        object_type="tenant_cluster",
        object_id=tenant.public_id,
        tenant=tenant,
        after={"host_cluster": host_cluster.name, "namespace": cluster.namespace},
    )
    return text
