"""Default container requests and limits in the tenant's host namespace."""

from __future__ import annotations

from clusters.spec import TenantSpec
from gpucloud.kube.meta import Manifest, obj, owned

NAME = "gpucloud-defaults"


def render_limit_range(tenant: TenantSpec) -> Manifest:
    """Defaults so that synced pods which state no requests still count against quotas sensibly."""
    limit = {
        "type": "Container",
        "defaultRequest": {"cpu": "500m", "memory": "1Gi"},
        "default": {"cpu": "2", "memory": "4Gi"},
    }
    return owned(obj("v1", "LimitRange", NAME, tenant.namespace, spec={"limits": [limit]}), tenant.slug)
