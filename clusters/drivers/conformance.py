"""What a Kubernetes host cluster has of the capabilities gpucloud uses, and what it lacks.

`check` judges one `ClusterDiscovery` (`clusters.drivers.discovery.discover(api, conformance=True)`: the
server version, the served API groups, the GPU nodes, the GPU Operator's ClusterPolicy, the DRA
DeviceClasses, Kueue's controller Deployment and configuration, the API server's addresses and a
SelfSubjectAccessReview of patching nodes) and answers one `Capability` per thing gpucloud uses: found or
missing, the version seen, what gpucloud does without it, and how to add it. The reconciler runs it on every
pass (clusters/partitions/gpu_pass.py), so installing an add-on later is noticed without registering the
cluster again.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from clusters.drivers import kueue_config
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


def check(
    discovery: ClusterDiscovery,
    *,
    mig_configmap: str,
    plugin_configmap: str,
    scheduler: str = "",
    several_models: Sequence[str] = (),
) -> list[Capability]:
    """Every capability gpucloud uses, judged from one observation (see the module docstring).

    With the host cluster's `scheduler`, also whether per-model quotas hold there; `several_models` names
    its tenants holding whole-GPU quotas of more than one model (whose pods all ask for `nvidia.com/gpu`).
    """
    caps = [_scheduler(discovery, "kueue"), _scheduler(discovery, "kai"), *_vcluster(discovery)]
    if _served(discovery, "kueue.x-k8s.io", "v1beta2")[0]:
        settings = kueue_config.check(discovery.kueue_config)
        caps += [_from_kueue(c) for c in settings] + [_pod_groups(settings), _kueue_visibility(discovery)]
    if scheduler:
        caps.append(_per_model(discovery, scheduler, several_models))
    if scheduler == "kai":
        caps.append(_kai_pod_defaults(discovery))
    if scheduler:
        caps.append(_topology_aware(discovery, scheduler))
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
    caps += _isolation(discovery, cilium)
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
    caps.append(_admission_policies(discovery))
    caps.append(_dedicated_nodes(discovery))
    return caps + _inference(discovery)


def _inference(discovery: ClusterDiscovery) -> list[Capability]:
    """What inference endpoints need (clusters/render/inference.py): routes and pools, and KServe where it
    runs the model servers."""
    route, route_versions = _served(discovery, "gateway.networking.k8s.io", "v1")
    pool, pool_versions = _served(discovery, "inference.networking.k8s.io", "v1")
    kserve, kserve_versions = _served(discovery, "serving.kserve.io", "v1alpha2")
    return [
        Capability(
            "inference_routing",
            route and pool,
            " · ".join(v for v in (route_versions, pool_versions) if v),
            "inference endpoints are not deployed here (each says so in its status): their HTTPRoute and "
            "InferencePool would have nowhere to go",
            "install the Gateway API CRDs (kubernetes-sigs/gateway-api, standard channel) and the Inference "
            "Extension's (kubernetes-sigs/gateway-api-inference-extension), and a Gateway implementation",
        ),
        Capability(
            "kserve",
            kserve,
            kserve_versions,
            "inference endpoints run as a vLLM Deployment and Service, not a KServe LLMInferenceService",
            "install KServe with its LLMInferenceService CRDs (kserve/kserve, charts/kserve-llmisvc-crd)",
        ),
    ]


def _from_kueue(setting: kueue_config.Setting) -> Capability:
    return Capability(setting.name, setting.holds, setting.seen, setting.without, setting.how)


def _pod_groups(settings: Sequence[kueue_config.Setting]) -> Capability:
    """vCluster syncs a Job's pods, not the Job: on the host, Kueue sees plain pods, and keeps them together
    only as a pod group, which the pods must declare themselves (nothing on the host knows a group's size)."""
    pods = next(s for s in settings if s.name == "kueue_pod_integration")
    return Capability(
        "kueue_pod_groups",
        pods.holds,
        "a Job's or JobSet's pods are one workload when their template carries the pod-group label and "
        "annotation (vCluster syncs both); gpucloud cannot add them: a host pod does not say its group's size"
        if pods.holds
        else "",
        "each synced pod is admitted on its own: a multi-pod job may start in part and hold GPUs while the "
        "rest waits",
        "the pod integration (kueue_pod_integration); in the tenant's pod template: labels: "
        "{kueue.x-k8s.io/pod-group-name: <job name>}, annotations: {kueue.x-k8s.io/pod-group-total-count: "
        '"<pods>"}',
    )


VISIBILITY = "visibility.kueue.x-k8s.io"


def _kueue_visibility(discovery: ClusterDiscovery) -> Capability:
    """Kueue's visibility API (an aggregated API, discovered only while its APIService is available) and
    gpucloud's right to read it: where a tenant's pending workload stands in its LocalQueue, by Kueue's word
    (`clusters/queue.py`)."""
    versions = discovery.groups.get(VISIBILITY, ())
    served = [v for v in ("v1beta2", "v1beta1") if v in versions]
    seen = ", ".join(f"{VISIBILITY}/{v}" for v in versions)
    if served and discovery.pending_workloads_read is False:
        seen += " · reading localqueues/pendingworkloads refused to gpucloud"
    return Capability(
        "kueue_visibility",
        bool(served) and discovery.pending_workloads_read is not False,
        seen,
        "tenants' queues show no position by Kueue's word: they fall back to gpucloud's own order (priority, "
        "then creation), which misses what Kueue reorders (a workload evicted and requeued goes to the back)",
        "enable Kueue's VisibilityOnDemand feature gate (on by default since Kueue 0.9; "
        "--feature-gates=VisibilityOnDemand=true) so that it registers the APIService "
        f"v1beta2.{VISIBILITY}; `kubectl get apiservice v1beta2.{VISIBILITY}` must say Available; and bind "
        "gpucloud's identity to a ClusterRole allowing get on localqueues/pendingworkloads in apiGroup "
        f"{VISIBILITY}",
    )


def _per_model(discovery: ClusterDiscovery, scheduler: str, several_models: Sequence[str]) -> Capability:
    """Whole GPUs of every model are `nvidia.com/gpu`: what keeps a tenant to each model's quota here
    (clusters/render/resourcequota.py)."""
    dra = _served(discovery, "resource.k8s.io", "v1")[0] and discovery.dra_driver
    tenants = f"tenants holding whole-GPU quotas of several models: {', '.join(several_models) or 'none'}"
    if scheduler == "kueue":
        holds = all(
            s.holds for s in kueue_config.check(discovery.kueue_config) if s.name in kueue_config.EVERY_POD
        )
        return Capability(
            "per_model_quotas",
            holds,
            f"Kueue flavors per model; {tenants}",
            "a pod Kueue does not admit is held by the namespace ResourceQuota only, which adds the models "
            "up: it may take one model's GPUs up to the tenant's whole-GPU total",
            f"set what {', '.join(kueue_config.EVERY_POD)} name, so that Kueue admits every tenant pod",
        )
    return Capability(
        "per_model_quotas",
        dra,
        f"KAI with DRA DeviceClasses per model; {tenants}"
        if dra
        else f"KAI without DRA: only the sum holds; {tenants}",
        "KAI has one GPU number per queue: a tenant holding whole GPUs of several models may take any of "
        "them up to its total",
        "Kubernetes 1.34+ and NVIDIA's DRA driver (see dra): gpucloud then quotas whole GPUs per model "
        "through one DeviceClass each",
    )


def _kai_pod_defaults(discovery: ClusterDiscovery) -> Capability:
    """KAI reads a pod's queue from its label and schedules only pods that name it: gpucloud sets both on
    every synced pod with a MutatingAdmissionPolicy where the cluster serves one."""
    versions = discovery.mutating_policies
    return Capability(
        "kai_pod_defaults",
        bool(versions),
        f"MutatingAdmissionPolicy served in admissionregistration.k8s.io/{', '.join(versions)}"
        if versions
        else "",
        "tenant pods are not given their queue (kai.scheduler/queue) and schedulerName kai-scheduler: the "
        "admission policies refuse a pod that lacks them, saying what to set",
        "Kubernetes 1.36+ (GA), or 1.34+ with kube-apiserver --feature-gates=MutatingAdmissionPolicy=true "
        "--runtime-config=admissionregistration.k8s.io/v1beta1=true",
    )


TAS_GATE = "TopologyAwareScheduling"  # Kueue's feature gate: beta and on by default since Kueue 0.14
NVLINK_CLIQUE = "nvidia.com/gpu.clique"


def _topology_aware(discovery: ClusterDiscovery, scheduler: str) -> Capability:
    """Whether the scheduler places a gang by the fleet's topology (clusters/render/topology.py): Kueue's
    TopologyAwareScheduling (every release gpucloud supports, 0.15+, has it on unless its Configuration's
    `featureGates` turns it off), or KAI's Topology CRD served (kai.scheduler/v1alpha1)."""
    cliques = sum(1 for n in discovery.nodes if NVLINK_CLIQUE in (n["metadata"].get("labels") or {}))
    nodes = f"{cliques} of {len(discovery.nodes)} GPU nodes carry {NVLINK_CLIQUE}"
    if scheduler == "kai":
        found, versions = _served(discovery, "kai.scheduler", "v1alpha1")
        return Capability(
            "topology_aware_scheduling",
            found,
            f"{versions} Topology · {nodes}" if found else "",
            "no KAI Topology is rendered and tenant pods get no topology default: KAI places a gang's pods "
            "without regard to racks or NVLink domains",
            "upgrade KAI Scheduler to v0.12 or later, whose chart installs the Topology CRD "
            "topologies.kai.scheduler (earlier releases read Kueue's Topology instead)",
        )
    served = _served(discovery, "kueue.x-k8s.io", "v1beta2")[0]
    gates = (discovery.kueue_config or {}).get("featureGates") or {}
    off = isinstance(gates, dict) and gates.get(TAS_GATE) is False
    seen = f"Kueue {TAS_GATE} turned off in its Configuration's featureGates" if off else ""
    if served and not off:
        seen = f"Kueue {TAS_GATE} on (beta, on by default since Kueue 0.14) · {nodes}"
    return Capability(
        "topology_aware_scheduling",
        served and not off,
        seen,
        "Kueue ignores the Topology gpucloud renders and the flavors' topologyName: gangs are admitted by "
        "quota alone and their pods land wherever kube-scheduler puts them",
        f"remove {TAS_GATE}: false from featureGates in Kueue's Configuration (ConfigMap "
        f"kueue-manager-config) and any --feature-gates={TAS_GATE}=false from the controller's "
        "arguments, then restart it",
    )


def _minor(server_version: str) -> tuple[int, int]:
    """(1, 33) from "v1.33.2-eks-1234"; (0, 0) when it cannot be read."""
    match = re.match(r"v?(\d+)\.(\d+)", server_version)
    return (int(match[1]), int(match[2])) if match else (0, 0)


def _isolation(discovery: ClusterDiscovery, cilium: bool) -> list[Capability]:
    """Pod Security admission, whether NetworkPolicies are enforced, and the API server's addresses."""
    pod_security = _minor(discovery.server_version) >= (1, 25)
    addresses = ", ".join(discovery.api_server_cidrs)
    return [
        Capability(
            "pod_security",
            pod_security,
            f"built-in Pod Security admission ({discovery.server_version})" if pod_security else "",
            "the pod-security.kubernetes.io labels on tenant namespaces are ignored: only the vCluster's own "
            "pod security standard and the admission policies hold tenants' pods to their tier",
            "upgrade to Kubernetes 1.25 or later (Pod Security admission is GA and on by default there)",
        ),
        Capability(
            "network_policies",
            cilium,
            "enforced by Cilium (CiliumNetworkPolicies with explicit denies as well)"
            if cilium
            else "not observable: NetworkPolicies hold only if the cluster's CNI enforces them",
            "tenant isolation (ingress from other tenants; egress to metadata addresses, the API server, "
            "private ranges and other tenants) holds only if the CNI enforces NetworkPolicies: Calico, "
            "Cilium, Antrea, kube-router and cloud network-policy add-ons do; flannel and kindnet alone "
            "do not",
            "check: from a pod in a tenant's host namespace, `wget -T 3 -O- http://169.254.169.254/` must "
            "time out (docs/kubernetes.md, 'What holds on the cluster'); or install Cilium (helm install "
            "cilium cilium/cilium -n kube-system)",
        ),
        Capability(
            "api_server_addresses",
            bool(addresses),
            addresses,
            "tenants' egress policies cannot name the API server: where it has a public address tenants may "
            "reach it, and the vCluster control plane's egress is not fenced in",
            "let gpucloud's credentials read the `kubernetes` EndpointSlice in `default` "
            "(discovery.k8s.io endpointslices: list) or Endpoints (endpoints: get)",
        ),
    ]


ADMISSION_POLICIES_SINCE = (1, 30)  # admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy went GA


def _admission_policies(discovery: ClusterDiscovery) -> Capability:
    """gpucloud's ValidatingAdmissionPolicies (clusters/render/admission.py) need Kubernetes 1.30+.

    The group has served v1 webhooks since 1.16, so the server version decides whether its v1 has policies.
    """
    served, versions = _served(discovery, "admissionregistration.k8s.io", "v1")
    return Capability(
        "admission_policies",
        served and _minor(discovery.server_version) >= ADMISSION_POLICIES_SINCE,
        f"Kubernetes {discovery.server_version} · {versions}" if served else "",
        "nothing on the host refuses what a tenant's vCluster syncs: GPU resources beyond the tenant's quota "
        "or tier, nodeName, other tenants' or quarantined nodes, host namespaces, hostPath, privileged pods "
        "and foreign queues reach the nodes; and the driver cannot apply the policies, so tenants fail",
        "upgrade the host cluster to Kubernetes 1.30 or later (ValidatingAdmissionPolicy is GA and on by "
        "default there)",
    )


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
