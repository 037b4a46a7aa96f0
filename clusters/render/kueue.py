"""Kueue (kueue.x-k8s.io/v1beta2) objects: flavors, cohorts and queues for tenants' GPU quotas."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from clusters.spec import QuotaSpec, TenantSpec
from gpucloud.kube.meta import SHARED, Manifest, obj, owned

from . import topology
from .profile import ClusterProfile

API = "kueue.x-k8s.io/v1beta2"
LOCAL_QUEUE = "default"
TOPOLOGY = topology.KUEUE_TOPOLOGY
HOSTNAME_LABEL = topology.HOSTNAME
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def flavor_name(gpu_class: str) -> str:
    """A GPU class as a DNS subdomain: `H200-141GB.MIG 1g` → `h200-141gb.mig-1g`."""
    return re.sub(r"[^a-z0-9.-]+", "-", gpu_class.lower()).strip("-.")


def cohort_name(tier: str) -> str:
    return f"gpucloud-{tier}"


def cluster_queue_name(tenant: TenantSpec) -> str:
    return tenant.namespace


def render_resource_flavor(quota: QuotaSpec, profile: ClusterProfile) -> Manifest:
    """One flavor per GPU class, pinned to the class's nodes and tolerating the GPU taint."""
    spec: dict[str, Any] = {"nodeLabels": dict(quota.node_labels), "tolerations": [GPU_TOLERATION]}
    if topology.levels(profile):
        spec["topologyName"] = TOPOLOGY
    return owned(obj(API, "ResourceFlavor", flavor_name(quota.gpu_class), spec=spec), SHARED)


def render_cohort(tier: str) -> Manifest:
    """The tenants of one trust tier lend to and borrow from each other, never across tiers."""
    return owned(obj(API, "Cohort", cohort_name(tier), spec={}), SHARED)


def render_topology(profile: ClusterProfile) -> Manifest:
    """Topology levels for topology-aware scheduling (topology.py): the registered levels, the NVLink domain
    where nodes carry it, and the hostname, which Kueue requires lowest."""
    spec = {"levels": [{"nodeLabel": level} for level in topology.levels(profile)]}
    return owned(obj(API, "Topology", TOPOLOGY, spec=spec), SHARED)


def render_priority_classes(profile: ClusterProfile) -> list[Manifest]:
    return [
        owned(obj(API, "WorkloadPriorityClass", name, value=value, description=description), SHARED)
        for name, value, description in profile.priority_classes
    ]


def _flavor_quota(quota: QuotaSpec) -> dict[str, Any]:
    resource: dict[str, Any] = {
        "name": quota.resource_name,
        "nominalQuota": str(quota.guaranteed),
        "borrowingLimit": str(quota.burst),
    }
    if quota.lendable is not None:
        # Kueue rejects a lendingLimit above the nominal quota: one cannot lend what one is not guaranteed.
        resource["lendingLimit"] = str(min(quota.lendable, quota.guaranteed))
    return {"name": flavor_name(quota.gpu_class), "resources": [resource]}


def resource_groups(quotas: Iterable[QuotaSpec]) -> list[dict[str, Any]]:
    """One resource group per resource name; GPU classes sharing a name become flavors of one group.

    Kueue lets a resource appear in only one group, and tries a group's flavors in order.
    """
    by_resource: dict[str, list[QuotaSpec]] = {}
    for quota in sorted(quotas, key=lambda q: (q.resource_name, q.gpu_class)):
        by_resource.setdefault(quota.resource_name, []).append(quota)
    return [
        {"coveredResources": [name], "flavors": [_flavor_quota(q) for q in group]}
        for name, group in by_resource.items()
    ]


def render_cluster_queue(tenant: TenantSpec) -> Manifest:
    """The tenant's queue: guarantees, borrowing and lending per GPU class, held while suspended."""
    spec = {
        "cohortName": cohort_name(tenant.trust_tier),
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": tenant.namespace}},
        "queueingStrategy": "BestEffortFIFO",
        "resourceGroups": resource_groups(tenant.quotas),
        "preemption": {
            "reclaimWithinCohort": "Any",
            "withinClusterQueue": "LowerPriority",
            "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 100},
        },
        "fairSharing": {"weight": str(max((q.weight for q in tenant.quotas), default=1))},
        "stopPolicy": "Hold" if tenant.desired == "suspended" else "None",
    }
    return owned(obj(API, "ClusterQueue", cluster_queue_name(tenant), spec=spec), tenant.slug)


def render_local_queue(tenant: TenantSpec) -> Manifest:
    """The queue tenant workloads name (`kueue.x-k8s.io/queue-name: default`) in the host namespace."""
    spec = {
        "clusterQueue": cluster_queue_name(tenant),
        "stopPolicy": "Hold" if tenant.desired == "suspended" else "None",
    }
    return owned(obj(API, "LocalQueue", LOCAL_QUEUE, tenant.namespace, spec=spec), tenant.slug)


def render_tenant_queues(tenant: TenantSpec) -> list[Manifest]:
    return [render_cluster_queue(tenant), render_local_queue(tenant)]


def render_shared(tenants: Sequence[TenantSpec], profile: ClusterProfile) -> list[Manifest]:
    """Flavors, cohorts, priority classes and topology that the given tenants need between them."""
    flavors: dict[str, Manifest] = {}
    for tenant in tenants:
        for quota in tenant.quotas:
            flavors.setdefault(flavor_name(quota.gpu_class), render_resource_flavor(quota, profile))
    tiers = sorted({tenant.trust_tier for tenant in tenants})
    shared = [flavors[name] for name in sorted(flavors)] + [render_cohort(tier) for tier in tiers]
    if tenants:
        shared += render_priority_classes(profile)
        if topology.levels(profile):
            shared.append(render_topology(profile))
    return shared
