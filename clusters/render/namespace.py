"""The tenant's host namespace."""

from __future__ import annotations

from clusters.spec import TenantSpec
from gpucloud.kube.meta import TRUST_TIER, Manifest, obj, owned

from .profile import ClusterProfile

# Pod Security admission's namespace labels (built into the API server since Kubernetes 1.25).
POD_SECURITY = "pod-security.kubernetes.io"
ENFORCE = f"{POD_SECURITY}/enforce"
ENFORCE_VERSION = f"{POD_SECURITY}/enforce-version"
WARN = f"{POD_SECURITY}/warn"
WARN_VERSION = f"{POD_SECURITY}/warn-version"
AUDIT = f"{POD_SECURITY}/audit"
AUDIT_VERSION = f"{POD_SECURITY}/audit-version"
# The standard's version that is enforced, pinned so that upgrading a host cluster never tightens what
# tenants' running workloads are held to; warn and audit follow `latest`, so a newer, stricter version
# shows up as kubectl warnings and audit annotations before gpucloud moves the pin.
POD_SECURITY_VERSION = "v1.34"


def render_namespace(tenant: TenantSpec, profile: ClusterProfile) -> Manifest:
    """The host namespace; its labels are what ClusterQueues, NetworkPolicies and Pod Security select on."""
    level = profile.pod_security_level(tenant.trust_tier)
    ns = obj("v1", "Namespace", tenant.namespace)
    ns["metadata"]["labels"] = {
        TRUST_TIER: tenant.trust_tier,
        ENFORCE: level,
        ENFORCE_VERSION: POD_SECURITY_VERSION,
        WARN: level,
        WARN_VERSION: "latest",
        AUDIT: level,
        AUDIT_VERSION: "latest",
    }
    return owned(ns, tenant.slug)
