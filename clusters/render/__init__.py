"""Pure functions from tenants' desired state to the Kubernetes objects that realise it.

Nothing here talks to a cluster or imports Django: each module renders one kind of object from plain
values (`TenantSpec`, `ClusterProfile`) to dict manifests, ready for server-side apply. Every manifest
carries the ownership labels and a hash of itself (see `meta`).
"""

from __future__ import annotations

from collections.abc import Sequence

from clusters.spec import TenantSpec
from gpucloud.kube.meta import MANAGED_BY, MANAGER, SHARED, SPEC_HASH, TENANT, Manifest, spec_hash

from . import admission, dra, kai, kueue, topology
from .inference import render_endpoints
from .limitrange import render_limit_range
from .namespace import render_namespace
from .networkpolicy import render_network_policies
from .profile import ClusterProfile
from .resourcequota import render_resource_quota
from .vcluster import render_vcluster

__all__ = [
    "MANAGED_BY",
    "MANAGER",
    "SHARED",
    "SPEC_HASH",
    "TENANT",
    "ClusterProfile",
    "Manifest",
    "render_shared",
    "render_tenant",
    "spec_hash",
]


def render_tenant(tenant: TenantSpec, profile: ClusterProfile) -> list[Manifest]:
    """Every object owned by one tenant, namespace first; nothing for a tenant that should be absent."""
    if tenant.desired == "absent":
        return []
    # The admission params right after the namespace: before the vCluster, whose pods they admit.
    objects = [render_namespace(tenant, profile), admission.render_params(tenant, profile)]
    objects += [render_resource_quota(tenant, profile), render_limit_range(tenant)]
    objects += render_network_policies(tenant, profile)
    objects += render_vcluster(tenant, profile)
    if profile.scheduler == "kai":
        objects.append(kai.render_leaf_queue(tenant))
    else:
        objects += kueue.render_tenant_queues(tenant)
    # DRA claim templates are applied inside the vCluster (its values, render/vcluster.py), not here.
    return objects + render_endpoints(tenant, profile)


def render_shared(tenants: Sequence[TenantSpec], profile: ClusterProfile) -> list[Manifest]:
    """The objects the present tenants need between them (labelled with the `SHARED` tenant)."""
    present = [tenant for tenant in tenants if tenant.desired != "absent"]
    device_classes = dra.render_device_classes(present) if profile.dra else []
    policies = admission.render_shared(present, profile) + topology.render_shared(present, profile)
    if profile.scheduler == "kai":
        return kai.render_shared(present, profile.mutating_admission) + device_classes + policies
    return kueue.render_shared(present, profile) + device_classes + policies
