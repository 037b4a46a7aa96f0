"""KAI Scheduler (scheduling.run.ai/v2) queues: a parent per trust tier, a leaf per tenant."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from clusters.spec import QuotaSpec, TenantSpec
from fleet import catalog
from gpucloud.kube.meta import SHARED, TRUST_TIER, Manifest, obj, owned

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


def render_shared(tenants: Sequence[TenantSpec], mutating_admission: str = "") -> list[Manifest]:
    """Parent queues per tier; with a served MutatingAdmissionPolicy version, the tenant pods' defaults."""
    parents = [render_parent_queue(tier) for tier in sorted({tenant.trust_tier for tenant in tenants})]
    return parents + (render_pod_defaults(mutating_admission) if tenants and mutating_admission else [])


POD_DEFAULTS = "gpucloud-kai-pod-defaults"
SYNCED_LABEL = "vcluster.loft.sh/managed-by"  # on every host object vCluster syncs from the tenant cluster
PARAMS = "gpucloud-admission"  # the namespace's ConfigMap the admission policies read: queue, schedulerName
# Set on every tenant pod at creation (a server-side-apply merge): the tenant's queue label, KAI's scheduler.
POD_DEFAULTS_EXPRESSION = (
    "Object{metadata: Object.metadata{labels: {'" + QUEUE_LABEL + "': params.data.queue}}, "
    "spec: Object.spec{schedulerName: params.data.schedulerName}}"
)


def render_pod_defaults(version: str) -> list[Manifest]:
    """A MutatingAdmissionPolicy (admissionregistration.k8s.io `version`) and its binding giving every pod
    created in a tenant namespace its tenant's KAI queue and KAI's scheduler name, from the namespace's own
    `gpucloud-admission` ConfigMap (`paramRef` without a namespace; no ConfigMap, no pod). vCluster syncs
    pods as the tenant wrote them, so this is what puts each of them in its queue; where the cluster serves
    no MutatingAdmissionPolicy, the admission policies refuse a pod that lacks them, saying what to set."""
    api = f"admissionregistration.k8s.io/{version}"
    policy = {
        "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
        "matchConstraints": {
            "resourceRules": [
                {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}
            ]
        },
        # The pods vCluster synced from the tenant's cluster (it labels them); not the vCluster's own.
        "matchConditions": [
            {
                "name": "synced-by-vcluster",
                "expression": f"has(object.metadata.labels) && '{SYNCED_LABEL}' in object.metadata.labels",
            }
        ],
        "failurePolicy": "Fail",
        "reinvocationPolicy": "IfNeeded",
        "mutations": [
            {"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": POD_DEFAULTS_EXPRESSION}}
        ],
    }
    binding = {
        "policyName": POD_DEFAULTS,
        "paramRef": {"name": PARAMS, "parameterNotFoundAction": "Deny"},
        "matchResources": {
            "namespaceSelector": {"matchExpressions": [{"key": TRUST_TIER, "operator": "Exists"}]}
        },
    }
    return [
        owned(obj(api, "MutatingAdmissionPolicy", POD_DEFAULTS, spec=policy), SHARED),
        owned(obj(api, "MutatingAdmissionPolicyBinding", POD_DEFAULTS, spec=binding), SHARED),
    ]
