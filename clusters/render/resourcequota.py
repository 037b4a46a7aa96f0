"""A ResourceQuota capping the GPU resources a tenant's host namespace may request.

It names every GPU resource name the host cluster offers (`ClusterProfile.gpu_resources`: whole GPUs, MIG
profiles, `nvidia.com/gpu.shared`, HAMi's vGPUs, memory and cores, the devices of every GPU DeviceClass),
with 0 for those the tenant holds none of: a ResourceQuota limits only what it names.

A resource name cannot always tell GPU models apart: whole GPUs of every model (and HAMi's vGPUs) are all
`nvidia.com/gpu`, so here they add up. What keeps each model to its own quota (`per_model`):
- Kueue: one ResourceFlavor per class, pinned to its model's nodes; every pod of the namespace is admitted
  by Kueue (its pod integration, `manageJobsWithoutQueueName`, the namespace selected: the conformance
  report says whether the cluster's Kueue is set up so), so each flavor's nominal + borrowing quota is the
  per-model limit and the ResourceQuota's sum a backstop.
- KAI on a DRA cluster: whole GPUs are claimed through one DeviceClass per model, each with its own device
  count here; `nvidia.com/gpu` is left to HAMi's vGPUs (0 without them).
- KAI without DRA: KAI has one GPU number per queue, so only the total holds; the conformance report names
  such tenants, and the ResourceQuota says so in an annotation.
"""

from __future__ import annotations

from clusters.spec import QuotaSpec, TenantSpec
from fleet import catalog
from gpucloud.kube.meta import Manifest, obj, owned

from . import dra
from .profile import ClusterProfile

NAME = "gpucloud-gpu-quota"
WHOLE_GPU = "nvidia.com/gpu"
PER_MODEL = "gpucloud.io/per-model"  # annotation: how per-model limits hold for this tenant


def is_whole(quota: QuotaSpec) -> bool:
    return quota.resource_name == WHOLE_GPU and not catalog.hami_percent(quota.gpu_class)


def models_sharing_a_name(tenant: TenantSpec) -> list[str]:
    """The whole-GPU classes of the tenant when it holds more than one model: their `nvidia.com/gpu`
    requests cannot tell the models apart."""
    whole = sorted(q.gpu_class for q in tenant.quotas if is_whole(q))
    return whole if len(whole) > 1 else []


def whole_through_dra(tenant: TenantSpec, profile: ClusterProfile | None) -> bool:
    """KAI cannot hold per-model limits itself; on a DRA cluster the per-model DeviceClasses can."""
    return bool(profile and profile.scheduler == "kai" and profile.dra and models_sharing_a_name(tenant))


def per_model(tenant: TenantSpec, profile: ClusterProfile | None) -> str:
    """How the limits of the tenant's whole-GPU classes hold per model (empty when it holds one model)."""
    models = models_sharing_a_name(tenant)
    if not models:
        return ""
    names = ", ".join(models)
    if profile is None or profile.scheduler == "kueue":
        return f"{names}: per model through Kueue flavors (every pod admitted by Kueue); quota holds the sum"
    if whole_through_dra(tenant, profile):
        return f"{names}: per model through DRA DeviceClasses; nvidia.com/gpu is not quota'd for whole GPUs"
    return f"{names}: only their sum holds (KAI has one GPU number per queue, and this cluster has no DRA)"


def gpu_ceilings(tenant: TenantSpec, profile: ClusterProfile | None = None) -> dict[str, int]:
    """Guaranteed plus burst per Kubernetes resource name, summed over the tenant's GPU classes (whole
    GPUs claimed through DRA instead where `whole_through_dra`)."""
    skip_whole = whole_through_dra(tenant, profile)
    ceilings: dict[str, int] = {}
    for quota in tenant.quotas:
        units = quota.guaranteed + quota.burst
        if not (skip_whole and is_whole(quota)):
            ceilings[quota.resource_name] = ceilings.get(quota.resource_name, 0) + units
        for name, amount in quota.per_unit:
            ceilings[name] = ceilings.get(name, 0) + units * amount
    return ceilings


def quota_key(name: str) -> str:
    """Extended resources can only be quota'd on requests, hence the `requests.` prefix; DRA device
    counts are keys of their own."""
    return name if name.endswith(dra.DEVICE_COUNT) else f"requests.{name}"


def hard_limits(tenant: TenantSpec, profile: ClusterProfile | None = None) -> dict[str, int]:
    """Every quota key of the tenant's ResourceQuota and its limit: what it holds, 0 for every other GPU
    resource name the cluster offers."""
    held = {quota_key(name): value for name, value in gpu_ceilings(tenant, profile).items()}
    if profile is not None and profile.dra:
        held |= dra.quota_limits(tenant.quotas)
    offered = {quota_key(name): 0 for name in (profile.gpu_resources if profile else ())}
    return dict(sorted((offered | held).items()))


def render_resource_quota(tenant: TenantSpec, profile: ClusterProfile | None = None) -> Manifest:
    hard = {key: str(value) for key, value in hard_limits(tenant, profile).items()}
    quota = obj("v1", "ResourceQuota", NAME, tenant.namespace, spec={"hard": hard})
    if how := per_model(tenant, profile):
        quota["metadata"]["annotations"] = {PER_MODEL: how}
    return owned(quota, tenant.slug)
