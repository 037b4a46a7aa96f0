"""The tenant's host namespace."""

from __future__ import annotations

from clusters.spec import TenantSpec
from gpucloud.kube.meta import TRUST_TIER, Manifest, obj, owned


def render_namespace(tenant: TenantSpec) -> Manifest:
    """The host namespace; its labels are what ClusterQueues and NetworkPolicies select on."""
    ns = obj("v1", "Namespace", tenant.namespace)
    ns["metadata"]["labels"] = {TRUST_TIER: tenant.trust_tier}
    return owned(ns, tenant.slug)
