"""What a Kubernetes host cluster has of the capabilities gpucloud uses, and what it lacks.

`check` judges one `ClusterDiscovery` (`clusters.drivers.discovery.discover(api, conformance=True)`: the
server version, the served API groups, the GPU nodes, the GPU Operator's ClusterPolicy, NVIDIA's DRA
DeviceClass, Kueue's controller Deployment and a SelfSubjectAccessReview of patching nodes, seven requests at
most) and answers one `Capability` per thing gpucloud uses: found or missing, the version seen, what gpucloud
does without it, and how to add it. The reconciler runs it on every pass (clusters/partitions/gpu_pass.py), so
installing an add-on later is noticed without registering the cluster again.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from clusters.drivers.discovery import HAMI_REGISTER, ClusterDiscovery
from gpucloud.kube.meta import DEDICATED_TO

NPD_CONDITIONS = ("KernelDeadlock", "ReadonlyFilesystem", "FrequentKubeletRestart", "CorruptDockerOverlay2")


@dataclass(frozen=True)
class Capability:
    name: str
    found: bool
    version: str  # what was seen (API versions, chart config…); "" when missing
    without: str  # what gpucloud does when it is missing
    how: str  # how to add it

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _served(discovery: ClusterDiscovery, group: str, version: str) -> tuple[bool, str]:
    versions = discovery.groups.get(group, ())
    return version in versions, ", ".join(f"{group}/{v}" for v in versions)


def _labelled(discovery: ClusterDiscovery, key: str, value: str = "true") -> int:
    return sum(1 for n in discovery.nodes if (n["metadata"].get("labels") or {}).get(key) == value)


def _policy(discovery: ClusterDiscovery, *path: str) -> Any:
    value: Any = (discovery.cluster_policy or {}).get("spec") or {}
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def check(discovery: ClusterDiscovery, *, mig_configmap: str, plugin_configmap: str) -> list[Capability]:
    """Every capability gpucloud uses, judged from one observation (see the module docstring)."""
    caps = [_scheduler(discovery, "kueue"), _scheduler(discovery, "kai"), *_vcluster(discovery)]
    caps += _gpu_operator(discovery, mig_configmap, plugin_configmap)
    annotated = sum(1 for n in discovery.nodes if HAMI_REGISTER in (n["metadata"].get("annotations") or {}))
    caps.append(
        Capability(
            "hami",
            bool(annotated),
            f"{annotated} GPU nodes registered by HAMi's device plugin" if annotated else "",
            "HAMi fraction classes (<model>.hami-<percent>) are refused on this host cluster",
            "helm install hami hami-charts/hami -n kube-system (Project-HAMi/HAMi); "
            "label the GPU nodes gpu=on",
        )
    )
    dra, versions = _served(discovery, "resource.k8s.io", "v1")
    caps.append(
        Capability(
            "dra",
            dra and discovery.dra_driver,
            versions + (" · DeviceClass gpu.nvidia.com" if discovery.dra_driver else ""),
            "no DeviceClasses or ResourceClaimTemplates: tenants' pods ask for extended resources only",
            "Kubernetes 1.34+ (resource.k8s.io/v1) and NVIDIA's DRA driver: "
            "helm install nvidia-dra-driver-gpu nvidia/nvidia-dra-driver-gpu -n nvidia-dra-driver-gpu",
        )
    )
    dcgm = _labelled(discovery, "nvidia.com/gpu.deploy.dcgm-exporter")
    caps.append(
        Capability(
            "dcgm_exporter",
            bool(dcgm),
            f"scheduled on {dcgm} of {len(discovery.nodes)} GPU nodes" if dcgm else "",
            "no usage is metered from this host cluster's GPUs (billing reads DCGM samples)",
            "the GPU Operator deploys it (dcgmExporter.enabled=true); or helm install dcgm-exporter",
        )
    )
    cilium, cilium_versions = _served(discovery, "cilium.io", "v2")
    caps.append(
        Capability(
            "cilium",
            cilium,
            cilium_versions,
            "tenants are separated with Kubernetes NetworkPolicies only (no CiliumNetworkPolicies)",
            "install Cilium as the cluster's CNI (helm install cilium cilium/cilium -n kube-system)",
        )
    )
    npd = sum(
        1
        for n in discovery.nodes
        if any(c.get("type") in NPD_CONDITIONS for c in (n.get("status") or {}).get("conditions") or [])
    )
    caps.append(
        Capability(
            "node_problem_detector",
            bool(npd),
            f"conditions reported on {npd} GPU nodes" if npd else "",
            "node faults are seen only through DCGM health fields and XIDs, not kernel or runtime conditions",
            "helm install node-problem-detector deliveryhero/node-problem-detector -n kube-system",
        )
    )
    caps.append(_dedicated_nodes(discovery))
    return caps


NODE_RBAC = (
    "gpucloud's identity needs get, list and patch on nodes (cluster scope): kubectl create clusterrole "
    "gpucloud-nodes --verb=get,list,patch --resource=nodes && kubectl create clusterrolebinding "
    "gpucloud-nodes --clusterrole=gpucloud-nodes --user=<the user of the kubeconfig gpucloud registers>"
)


def _dedicated_nodes(discovery: ClusterDiscovery) -> Capability:
    """Whether gpucloud can label and taint nodes for isolated tenants (`gpucloud.io/tenant=<slug>`), from a
    SelfSubjectAccessReview; when the cluster answers none, the report says so and what gpucloud needs."""
    dedicated = sum(1 for n in discovery.nodes if DEDICATED_TO in (n["metadata"].get("labels") or {}))
    seen = f"{dedicated} of {len(discovery.nodes)} GPU nodes dedicated to isolated tenants"
    if discovery.node_patch is None:
        seen = f"could not ask (no SelfSubjectAccessReview answer); {seen}"
    else:
        seen = f"patch nodes {'allowed' if discovery.node_patch else 'refused'}; {seen}"
    return Capability(
        "dedicated_nodes",
        bool(discovery.node_patch),
        seen,
        "isolated tenants' nodes are not labelled and tainted gpucloud.io/tenant=<slug>:NoSchedule: their "
        "pods wait (their vCluster selects only such nodes), and the quarantine taint is not written either",
        NODE_RBAC,
    )


def _scheduler(discovery: ClusterDiscovery, name: str) -> Capability:
    if name == "kueue":
        found, versions = _served(discovery, "kueue.x-k8s.io", "v1beta2")
        tag = discovery.kueue_image.rpartition(":")[2] if ":" in discovery.kueue_image else ""
        release = f"Kueue {tag}" if tag else "Kueue 0.15+"
        return Capability(
            "kueue",
            found,
            versions
            + (f" ({release})" if found else " (too old: gpucloud needs v1beta2)" if versions else ""),
            "tenants cannot use scheduler kueue here: no ClusterQueues, quotas only as ResourceQuotas",
            "helm install kueue oci://registry.k8s.io/kueue/charts/kueue --version 0.15.x -n kueue-system",
        )
    found, versions = _served(discovery, "scheduling.run.ai", "v2")
    return Capability(
        "kai",
        found,
        versions,
        "scheduler kai is refused for this host cluster",
        "helm install kai-scheduler oci://ghcr.io/nvidia/kai-scheduler/kai-scheduler -n kai-scheduler",
    )


def _vcluster(discovery: ClusterDiscovery) -> list[Capability]:
    flux = (
        _served(discovery, "helm.toolkit.fluxcd.io", "v2")[0]
        and _served(discovery, "source.toolkit.fluxcd.io", "v1")[0]
    )
    platform, platform_versions = _served(discovery, "management.loft.sh", "v1")
    return [
        Capability(
            "flux",
            flux,
            _served(discovery, "helm.toolkit.fluxcd.io", "v2")[1],
            "vCluster mode helmrelease is refused: tenant clusters cannot be installed through Flux",
            "flux install (helm-controller and source-controller are enough)",
        ),
        Capability(
            "vcluster_platform",
            platform,
            platform_versions,
            "vCluster mode platform is refused; helmrelease (Flux) installs tenant clusters instead",
            "connect the cluster to vCluster Platform (vcluster platform add cluster)",
        ),
    ]


def _gpu_operator(discovery: ClusterDiscovery, mig_configmap: str, plugin_configmap: str) -> list[Capability]:
    operator = discovery.cluster_policy is not None
    strategy = _policy(discovery, "mig", "strategy") or ""
    mig_name = _policy(discovery, "migManager", "config", "name") or ""
    plugin_name = _policy(discovery, "devicePlugin", "config", "name") or ""
    capable = _labelled(discovery, "nvidia.com/mig.capable")
    state = ((discovery.cluster_policy or {}).get("status") or {}).get("state", "")
    policy_name = ((discovery.cluster_policy or {}).get("metadata") or {}).get("name", "")
    return [
        Capability(
            "gpu_operator",
            operator,
            f"ClusterPolicy {policy_name} {state}".strip() if operator else "",
            "no partitions: MIG layouts and time-slicing are not applied, MIG and shared quotas count "
            "what the nodes happen to advertise",
            "helm install gpu-operator nvidia/gpu-operator -n gpu-operator",
        ),
        Capability(
            "mig_manager",
            operator and strategy == "mixed" and mig_name == mig_configmap and capable > 0,
            f"strategy {strategy or 'unset'}, config {mig_name or 'default'}, "
            f"{capable} MIG-capable GPU nodes",
            "MIG layouts gpucloud chooses are not applied (the MIG manager reads another config or none)",
            f'kubectl patch clusterpolicies.nvidia.com/cluster-policy --type merge -p \'{{"spec": {{"mig": '
            f'{{"strategy": "mixed"}}, "migManager": {{"config": {{"name": "{mig_configmap}", '
            f'"default": "all-disabled"}}}}}}}}\'',
        ),
        Capability(
            "device_plugin_sharing",
            operator and plugin_name == plugin_configmap,
            f"device-plugin config {plugin_name or 'default'}",
            "shared classes get no time-sliced nodes (the device plugin reads another config)",
            f'kubectl patch clusterpolicies.nvidia.com/cluster-policy --type merge -p \'{{"spec": '
            f'{{"devicePlugin": {{"config": {{"name": "{plugin_configmap}", "default": "default"}}}}}}}}\'',
        ),
    ]
