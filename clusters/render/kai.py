"""KAI Scheduler (scheduling.run.ai/v2) queues: a parent per trust tier, a leaf per tenant."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from clusters.spec import TenantSpec
from gpucloud.kube.meta import SHARED, Manifest, obj, owned

API = "scheduling.run.ai/v2"
WHOLE_GPU = "nvidia.com/gpu"
UNLIMITED = {"quota": -1, "overQuotaWeight": 1, "limit": -1}


def parent_queue_name(tier: str) -> str:
    return f"gpucloud-{tier}"


def leaf_queue_name(tenant: TenantSpec) -> str:
    """The name tenant pods carry in `kai.scheduler/queue`."""
    return tenant.namespace


def render_parent_queue(tier: str) -> Manifest:
    """No guarantee of its own: the leaves' quotas are what KAI divides."""
    spec = {
        "displayName": f"gpucloud {tier} tenants",
        "resources": {"gpu": dict(UNLIMITED), "cpu": dict(UNLIMITED), "memory": dict(UNLIMITED)},
    }
    return owned(obj(API, "Queue", parent_queue_name(tier), spec=spec), SHARED)


def gpu_resources(tenant: TenantSpec) -> dict[str, Any]:
    """KAI has one GPU number per queue (no per-model quota), counted in whole GPUs.

    MIG and HAMi quotas are not whole GPUs and are enforced by the namespace ResourceQuota only.
    A suspended tenant gets no quota and a limit of zero, so nothing new is scheduled for it.
    """
    whole = [q for q in tenant.quotas if q.resource_name == WHOLE_GPU]
    if tenant.desired == "suspended":
        return {"quota": 0, "overQuotaWeight": 0, "limit": 0}
    return {
        "quota": sum(q.guaranteed for q in whole),
        "overQuotaWeight": max((q.weight for q in whole), default=1),
        "limit": sum(q.guaranteed + q.burst for q in whole),
    }


def render_leaf_queue(tenant: TenantSpec) -> Manifest:
    spec = {
        "displayName": tenant.slug,
        "parentQueue": parent_queue_name(tenant.trust_tier),
        "resources": {"gpu": gpu_resources(tenant), "cpu": dict(UNLIMITED), "memory": dict(UNLIMITED)},
    }
    return owned(obj(API, "Queue", leaf_queue_name(tenant), spec=spec), tenant.slug)


def render_shared(tenants: Sequence[TenantSpec]) -> list[Manifest]:
    return [render_parent_queue(tier) for tier in sorted({tenant.trust_tier for tenant in tenants})]
