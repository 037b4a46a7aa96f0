"""A ResourceQuota capping the GPU resources a tenant's host namespace may request."""

from __future__ import annotations

from workers.drivers.base import TenantSpec

from .meta import Manifest, obj, owned

NAME = "gpucloud-gpu-quota"


def gpu_ceilings(tenant: TenantSpec) -> dict[str, int]:
    """Guaranteed plus burst per Kubernetes resource name, summed over the tenant's GPU classes."""
    ceilings: dict[str, int] = {}
    for quota in tenant.quotas:
        ceilings[quota.resource_name] = ceilings.get(quota.resource_name, 0) + quota.guaranteed + quota.burst
    return ceilings


def render_resource_quota(tenant: TenantSpec) -> Manifest:
    """Extended resources can only be quota'd on requests, hence the `requests.` prefix."""
    hard = {f"requests.{name}": str(value) for name, value in sorted(gpu_ceilings(tenant).items())}
    return owned(obj("v1", "ResourceQuota", NAME, tenant.namespace, spec={"hard": hard}), tenant.slug)
