"""A ResourceQuota capping the GPU resources a tenant's host namespace may request."""

from __future__ import annotations

from clusters.spec import TenantSpec
from gpucloud.kube.meta import Manifest, obj, owned

from . import dra
from .profile import ClusterProfile

NAME = "gpucloud-gpu-quota"


def gpu_ceilings(tenant: TenantSpec) -> dict[str, int]:
    """Guaranteed plus burst per Kubernetes resource name, summed over the tenant's GPU classes."""
    ceilings: dict[str, int] = {}
    for quota in tenant.quotas:
        units = quota.guaranteed + quota.burst
        ceilings[quota.resource_name] = ceilings.get(quota.resource_name, 0) + units
        for name, amount in quota.per_unit:
            ceilings[name] = ceilings.get(name, 0) + units * amount
    return ceilings


def render_resource_quota(tenant: TenantSpec, profile: ClusterProfile | None = None) -> Manifest:
    """Extended resources can only be quota'd on requests, hence the `requests.` prefix; on a DRA cluster,
    the devices of each GPU class's device class too."""
    hard = {f"requests.{name}": str(value) for name, value in sorted(gpu_ceilings(tenant).items())}
    if profile is not None and profile.dra:
        hard |= {name: str(value) for name, value in sorted(dra.quota_limits(tenant.quotas).items())}
    return owned(obj("v1", "ResourceQuota", NAME, tenant.namespace, spec={"hard": hard}), tenant.slug)
