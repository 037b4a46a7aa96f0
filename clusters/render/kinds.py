"""Which kinds of object a host cluster gets, from its profile: the apply order of the Kubernetes driver."""

from __future__ import annotations

from clusters.render import ClusterProfile
from gpucloud.kube.kinds import (
    ADMISSION_PARAMS,
    CILIUM_NETWORK_POLICY,
    CLUSTER_QUEUE,
    COHORT,
    DEPLOYMENT,
    DEVICE_CLASS,
    HELM_RELEASE,
    HELM_REPOSITORY,
    HTTP_ROUTE,
    INFERENCE_POOL,
    KAI_QUEUE,
    KAI_TOPOLOGY,
    KUEUE_TOPOLOGY,
    LIMIT_RANGE,
    LLM_INFERENCE_SERVICE,
    LOCAL_QUEUE,
    NAMESPACE,
    NETWORK_POLICY,
    RESOURCE_CLAIM_TEMPLATE,
    RESOURCE_FLAVOR,
    RESOURCE_QUOTA,
    SERVICE,
    VALIDATING_ADMISSION_POLICY,
    VALIDATING_ADMISSION_POLICY_BINDING,
    VIRTUAL_CLUSTER_INSTANCE,
    WORKLOAD_PRIORITY_CLASS,
    Kind,
    mutating_admission_kinds,
)


def kinds_for(profile: ClusterProfile) -> list[Kind]:
    """The kinds a host cluster with this profile gets, in apply order (a namespace before its content).

    Pruning deletes in the reverse order.
    """
    # A tenant's admission params right after its namespace: before the vCluster whose pods they admit.
    kinds = [NAMESPACE, ADMISSION_PARAMS, RESOURCE_QUOTA, LIMIT_RANGE, NETWORK_POLICY]
    if profile.cilium:
        kinds.append(CILIUM_NETWORK_POLICY)
    if profile.vcluster_mode == "platform":
        kinds.append(VIRTUAL_CLUSTER_INSTANCE)
    else:
        kinds += [HELM_REPOSITORY, HELM_RELEASE]
    # A Topology's kind wherever the cluster serves it, rendered or not: so that one no longer rendered
    # (levels unregistered, KAI's renamed on a change of levels) is pruned. The Topology before what names it.
    if profile.scheduler == "kai":
        kinds += [KAI_TOPOLOGY, KAI_QUEUE] if profile.kai_topology else [KAI_QUEUE]
    else:
        kinds += [KUEUE_TOPOLOGY, RESOURCE_FLAVOR, COHORT, WORKLOAD_PRIORITY_CLASS]
        kinds += [CLUSTER_QUEUE, LOCAL_QUEUE]
    if profile.mutating_admission:  # KAI's pod defaults, either scheduler's topology default (topology.py)
        kinds += mutating_admission_kinds(profile.mutating_admission)
    if profile.dra:
        kinds += [DEVICE_CLASS, RESOURCE_CLAIM_TEMPLATE]
    # A policy before the binding that enforces it; pruning removes the binding first.
    kinds += [VALIDATING_ADMISSION_POLICY, VALIDATING_ADMISSION_POLICY_BINDING]
    return kinds + inference_kinds(profile)


def inference_kinds(profile: ClusterProfile) -> list[Kind]:
    """Inference endpoints' kinds, last: their pods come after the queues and the policies that admit them
    (and pruning removes the route before the model server). None where the cluster serves no InferencePool
    or HTTPRoute (`ClusterProfile.inference`): listing a kind it does not serve would fail every pass."""
    if not profile.inference:
        return []
    servers = [LLM_INFERENCE_SERVICE] if profile.kserve else [DEPLOYMENT, SERVICE]
    return [*servers, INFERENCE_POOL, HTTP_ROUTE]
