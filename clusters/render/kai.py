"""KAI Scheduler (scheduling.run.ai/v2) queues: a parent per trust tier, a leaf per tenant."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from clusters.spec import QuotaSpec, TenantSpec
from fleet import catalog
from gpucloud.kube.meta import SHARED, Manifest, obj, owned

API = "scheduling.run.ai/v2"
WHOLE_GPU = "nvidia.com/gpu"
MIG_RESOURCE = re.compile(r"nvidia\.com/mig-(\d+)g\.(\d+)gb")  # KAI's own pattern (resources/mig.go)
SCHEDULER_NAME = "kai-scheduler"  # the scheduler name KAI's chart registers; tenant pods must carry it
QUEUE_LABEL = "kai.scheduler/queue"
UNLIMITED = {"quota": -1, "overQuotaWeight": 1, "limit": -1}


def parent_queue_name(tier: str) -> str:
    return f"gpucloud-{tier}"


def leaf_queue_name(tenant: TenantSpec) -> str:
    """The name tenant pods carry in `kai.scheduler/queue` (`QUEUE_LABEL`)."""
    return tenant.namespace


def render_parent_queue(tier: str) -> Manifest:
    """No guarantee of its own: the leaves' quotas are what KAI divides."""
    spec = {
        "displayName": f"gpucloud {tier} tenants",
        "resources": {"gpu": dict(UNLIMITED), "cpu": dict(UNLIMITED), "memory": dict(UNLIMITED)},
    }
    return owned(obj(API, "Queue", parent_queue_name(tier), spec=spec), SHARED)


def gpus_charged(quota: QuotaSpec) -> int:
    """What KAI charges one unit of a class against a queue's GPU number, as its scheduler counts pods'
    requests (`GpuResourceRequirement.GetGpusQuota`, NVIDIA/KAI-Scheduler): a whole GPU 1, a MIG slice
    `nvidia.com/mig-<g>g.<mem>gb` its g compute slices, a DRA device 1. 0 for what KAI does not schedule:
    HAMi vGPUs (HAMi's own scheduler places them, and they too ask for `nvidia.com/gpu`: counted here, a
    quarter GPU would weigh as a whole one) and time-sliced `nvidia.com/gpu.shared`; those hold through the
    namespace ResourceQuota only."""
    if catalog.hami_percent(quota.gpu_class):
        return 0
    if quota.resource_name == WHOLE_GPU:
        return 1
    mig = MIG_RESOURCE.fullmatch(quota.resource_name)
    return int(mig.group(1)) if mig else 0


def gpu_resources(tenant: TenantSpec) -> dict[str, Any]:
    """KAI has one GPU number per queue (no per-model quota): the guarantees and ceilings of the classes it
    schedules, in the units it charges (`gpus_charged`).

    A suspended tenant gets no quota and a limit of zero, so nothing new is scheduled for it.
    """
    if tenant.desired == "suspended":
        return {"quota": 0, "overQuotaWeight": 0, "limit": 0}
    counted = [(q, gpus_charged(q)) for q in tenant.quotas if gpus_charged(q)]
    return {
        "quota": sum(q.guaranteed * gpus for q, gpus in counted),
        "overQuotaWeight": max((q.weight for q, _ in counted), default=1),
        "limit": sum((q.guaranteed + q.burst) * gpus for q, gpus in counted),
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
