"""The kinds of object gpucloud manages in a host cluster, and their REST paths."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Kind:
    api_version: str
    kind: str
    plural: str
    namespaced: bool
    # A further label requirement when the driver lists the kind, for kinds gpucloud also writes elsewhere
    # (ConfigMaps: the GPU Operator's are the partition pass's, never the Kubernetes driver's to prune).
    selector: str = ""

    @property
    def key(self) -> tuple[str, str]:
        return (self.api_version, self.kind)

    def path(self, namespace: str | None = None, name: str | None = None) -> str:
        """The collection path (all namespaces when `namespace` is None) or an object's path."""
        base = f"/api/{self.api_version}" if "/" not in self.api_version else f"/apis/{self.api_version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        return f"{base}/{name}" if name else base

    def object_path(self, manifest: dict[str, Any]) -> str:
        meta = manifest["metadata"]
        return self.path(meta.get("namespace") if self.namespaced else None, meta["name"])


NAMESPACE = Kind("v1", "Namespace", "namespaces", False)
RESOURCE_QUOTA = Kind("v1", "ResourceQuota", "resourcequotas", True)
LIMIT_RANGE = Kind("v1", "LimitRange", "limitranges", True)
NETWORK_POLICY = Kind("networking.k8s.io/v1", "NetworkPolicy", "networkpolicies", True)
CILIUM_NETWORK_POLICY = Kind("cilium.io/v2", "CiliumNetworkPolicy", "ciliumnetworkpolicies", True)
HELM_REPOSITORY = Kind("source.toolkit.fluxcd.io/v1", "HelmRepository", "helmrepositories", True)
HELM_RELEASE = Kind("helm.toolkit.fluxcd.io/v2", "HelmRelease", "helmreleases", True)
VIRTUAL_CLUSTER_INSTANCE = Kind(
    "management.loft.sh/v1", "VirtualClusterInstance", "virtualclusterinstances", True
)
RESOURCE_FLAVOR = Kind("kueue.x-k8s.io/v1beta2", "ResourceFlavor", "resourceflavors", False)
COHORT = Kind("kueue.x-k8s.io/v1beta2", "Cohort", "cohorts", False)
WORKLOAD_PRIORITY_CLASS = Kind(
    "kueue.x-k8s.io/v1beta2", "WorkloadPriorityClass", "workloadpriorityclasses", False
)
KUEUE_TOPOLOGY = Kind("kueue.x-k8s.io/v1beta2", "Topology", "topologies", False)
CLUSTER_QUEUE = Kind("kueue.x-k8s.io/v1beta2", "ClusterQueue", "clusterqueues", False)
LOCAL_QUEUE = Kind("kueue.x-k8s.io/v1beta2", "LocalQueue", "localqueues", True)
KAI_QUEUE = Kind("scheduling.run.ai/v2", "Queue", "queues", False)
KAI_TOPOLOGY = Kind("kai.scheduler/v1alpha1", "Topology", "topologies", False)
# Admission (clusters/render/admission.py): a tenant's params, and the policies and bindings of each tier.
ADMISSION_PARAMS = Kind("v1", "ConfigMap", "configmaps", True, "app.kubernetes.io/component=admission")
VALIDATING_ADMISSION_POLICY = Kind(
    "admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy", "validatingadmissionpolicies", False
)
VALIDATING_ADMISSION_POLICY_BINDING = Kind(
    "admissionregistration.k8s.io/v1",
    "ValidatingAdmissionPolicyBinding",
    "validatingadmissionpolicybindings",
    False,
)
SECRET = Kind("v1", "Secret", "secrets", True)
NODE = Kind("v1", "Node", "nodes", False)
# Not managed: Kueue makes one per job a tenant submits; the driver only reads them (one list per pass).
WORKLOAD = Kind("kueue.x-k8s.io/v1beta2", "Workload", "workloads", True)
# Read on KAI host clusters for the tenants' queues: KAI's gangs, their pods, and the priorities they name.
POD_GROUP = Kind("scheduling.run.ai/v2alpha2", "PodGroup", "podgroups", True)
POD = Kind("v1", "Pod", "pods", True)
PRIORITY_CLASS = Kind("scheduling.k8s.io/v1", "PriorityClass", "priorityclasses", False)
# Kueue's visibility API (an aggregated API, served while the VisibilityOnDemand feature gate is on).
KUEUE_VISIBILITY = "visibility.kueue.x-k8s.io"

DEVICE_CLASS = Kind("resource.k8s.io/v1", "DeviceClass", "deviceclasses", False)
RESOURCE_CLAIM_TEMPLATE = Kind("resource.k8s.io/v1", "ResourceClaimTemplate", "resourceclaimtemplates", True)
# Not managed: made by the resource claim controller (from a template) or by tenants; the live view reads
# them.
RESOURCE_CLAIM = Kind("resource.k8s.io/v1", "ResourceClaim", "resourceclaims", True)

# Inference endpoints (clusters/render/inference.py). Deployments and Services are listed by their component
# label too: gpucloud may make others of those kinds one day, and only these are the renderer's.
INFERENCE_SELECTOR = "app.kubernetes.io/component=inference"
DEPLOYMENT = Kind("apps/v1", "Deployment", "deployments", True, INFERENCE_SELECTOR)
SERVICE = Kind("v1", "Service", "services", True, INFERENCE_SELECTOR)
LLM_INFERENCE_SERVICE = Kind(
    "serving.kserve.io/v1alpha2", "LLMInferenceService", "llminferenceservices", True
)
INFERENCE_POOL = Kind("inference.networking.k8s.io/v1", "InferencePool", "inferencepools", True)
HTTP_ROUTE = Kind("gateway.networking.k8s.io/v1", "HTTPRoute", "httproutes", True)

VCLUSTER_KINDS = (HELM_RELEASE, VIRTUAL_CLUSTER_INSTANCE)


def mutating_admission_kinds(version: str) -> tuple[Kind, Kind]:
    """MutatingAdmissionPolicy and its binding in one served version of admissionregistration.k8s.io."""
    api = f"admissionregistration.k8s.io/{version}"
    return (
        Kind(api, "MutatingAdmissionPolicy", "mutatingadmissionpolicies", False),
        Kind(api, "MutatingAdmissionPolicyBinding", "mutatingadmissionpolicybindings", False),
    )


# Not managed either: declared by people (Argo CD, Flux, kubectl) in the namespace a host cluster registered
# with --watch-tenants names; gpucloud applies them and writes their status (gitops.controller).
TENANT_RESOURCE = Kind("gpucloud.io/v1alpha1", "Tenant", "tenants", True)
RATE_CARD_RESOURCE = Kind("gpucloud.io/v1alpha1", "RateCard", "ratecards", True)
