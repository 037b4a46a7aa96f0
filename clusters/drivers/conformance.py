"""What a Kubernetes host cluster has of the capabilities gpucloud uses, and what it lacks.

`observe` reads the server version, the served API groups, the GPU nodes, the GPU Operator's ClusterPolicy,
NVIDIA's DRA DeviceClass and Kueue's controller Deployment (six requests at most); `check` answers one
`Capability` per thing gpucloud uses: found or missing, the version seen, what gpucloud does without it, and
how to add it. The reconciler runs it on every pass (clusters/partitions/gpu_pass.py), so installing an add-on
later is noticed without registering the cluster again.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from gpucloud.kube import kinds as k
from gpucloud.kube.api import ApiStatusError, KubeApi, NotFound

CLUSTER_POLICY = k.Kind("nvidia.com/v1", "ClusterPolicy", "clusterpolicies", False)
HAMI_REGISTER = "hami.io/node-nvidia-register"
KUEUE_SELECTOR = "app.kubernetes.io/name=kueue"  # the Kueue chart's controller Deployment
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


@dataclass(frozen=True)
class Seen:
    """The raw observations the capabilities are judged from."""

    server_version: str
    groups: dict[str, tuple[str, ...]]
    nodes: list[dict[str, Any]]
    cluster_policy: dict[str, Any] | None
    dra_driver: bool
    kueue_image: str = ""  # the Kueue controller's image, whose tag is its version


def _get(api: KubeApi, path: str, query: dict[str, str] | None = None) -> Any:
    try:
        return api.get(path, query)
    except NotFound:
        return None
    except ApiStatusError as exc:
        if exc.status == 401:
            raise
        return None


def observe(api: KubeApi) -> Seen:
    groups = {
        g["name"]: tuple(v["version"] for v in g.get("versions") or [])
        for g in (api.get("/apis").get("groups") or [])
    }
    nodes = (_get(api, k.NODE.path(), {"labelSelector": "nvidia.com/gpu.product"}) or {}).get("items") or []
    policy = None
    if "v1" in groups.get("nvidia.com", ()):
        items = (_get(api, CLUSTER_POLICY.path()) or {}).get("items") or []
        policy = items[0] if items else None
    dra_driver = "v1" in groups.get("resource.k8s.io", ()) and (
        _get(api, k.DEVICE_CLASS.path(name="gpu.nvidia.com")) is not None
    )
    version = (api.get("/version") or {}).get("gitVersion", "")
    image = ""
    if "kueue.x-k8s.io" in groups:
        deployments = _get(api, "/apis/apps/v1/deployments", {"labelSelector": KUEUE_SELECTOR}) or {}
        for item in deployments.get("items") or []:
            containers = ((item.get("spec") or {}).get("template") or {}).get("spec", {}).get(
                "containers"
            ) or []
            image = next((c.get("image", "") for c in containers if "kueue" in c.get("image", "")), image)
    return Seen(version, groups, nodes, policy, dra_driver, image)


def _served(seen: Seen, group: str, version: str) -> tuple[bool, str]:
    versions = seen.groups.get(group, ())
    return version in versions, ", ".join(f"{group}/{v}" for v in versions)


def _labelled(seen: Seen, key: str, value: str = "true") -> int:
    return sum(1 for n in seen.nodes if (n["metadata"].get("labels") or {}).get(key) == value)


def _policy(seen: Seen, *path: str) -> Any:
    value: Any = (seen.cluster_policy or {}).get("spec") or {}
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def check(seen: Seen, *, mig_configmap: str, plugin_configmap: str) -> list[Capability]:
    """Every capability gpucloud uses, judged from one observation (see the module docstring)."""
    caps = [_scheduler(seen, "kueue"), _scheduler(seen, "kai"), *_vcluster(seen)]
    caps += _gpu_operator(seen, mig_configmap, plugin_configmap)
    annotated = sum(1 for n in seen.nodes if HAMI_REGISTER in (n["metadata"].get("annotations") or {}))
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
    dra, versions = _served(seen, "resource.k8s.io", "v1")
    caps.append(
        Capability(
            "dra",
            dra and seen.dra_driver,
            versions + (" · DeviceClass gpu.nvidia.com" if seen.dra_driver else ""),
            "no DeviceClasses or ResourceClaimTemplates: tenants' pods ask for extended resources only",
            "Kubernetes 1.34+ (resource.k8s.io/v1) and NVIDIA's DRA driver: "
            "helm install nvidia-dra-driver-gpu nvidia/nvidia-dra-driver-gpu -n nvidia-dra-driver-gpu",
        )
    )
    dcgm = _labelled(seen, "nvidia.com/gpu.deploy.dcgm-exporter")
    caps.append(
        Capability(
            "dcgm_exporter",
            bool(dcgm),
            f"scheduled on {dcgm} of {len(seen.nodes)} GPU nodes" if dcgm else "",
            "no usage is metered from this host cluster's GPUs (billing reads DCGM samples)",
            "the GPU Operator deploys it (dcgmExporter.enabled=true); or helm install dcgm-exporter",
        )
    )
    cilium, cilium_versions = _served(seen, "cilium.io", "v2")
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
        for n in seen.nodes
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
    return caps


def _scheduler(seen: Seen, name: str) -> Capability:
    if name == "kueue":
        found, versions = _served(seen, "kueue.x-k8s.io", "v1beta2")
        tag = seen.kueue_image.rpartition(":")[2] if ":" in seen.kueue_image else ""
        release = f"Kueue {tag}" if tag else "Kueue 0.15+"
        return Capability(
            "kueue",
            found,
            versions
            + (f" ({release})" if found else " (too old: gpucloud needs v1beta2)" if versions else ""),
            "tenants cannot use scheduler kueue here: no ClusterQueues, quotas only as ResourceQuotas",
            "helm install kueue oci://registry.k8s.io/kueue/charts/kueue --version 0.15.x -n kueue-system",
        )
    found, versions = _served(seen, "scheduling.run.ai", "v2")
    return Capability(
        "kai",
        found,
        versions,
        "scheduler kai is refused for this host cluster",
        "helm install kai-scheduler oci://ghcr.io/nvidia/kai-scheduler/kai-scheduler -n kai-scheduler",
    )


def _vcluster(seen: Seen) -> list[Capability]:
    flux = (
        _served(seen, "helm.toolkit.fluxcd.io", "v2")[0]
        and _served(seen, "source.toolkit.fluxcd.io", "v1")[0]
    )
    platform, platform_versions = _served(seen, "management.loft.sh", "v1")
    return [
        Capability(
            "flux",
            flux,
            _served(seen, "helm.toolkit.fluxcd.io", "v2")[1],
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


def _gpu_operator(seen: Seen, mig_configmap: str, plugin_configmap: str) -> list[Capability]:
    operator = seen.cluster_policy is not None
    strategy = _policy(seen, "mig", "strategy") or ""
    mig_name = _policy(seen, "migManager", "config", "name") or ""
    plugin_name = _policy(seen, "devicePlugin", "config", "name") or ""
    capable = _labelled(seen, "nvidia.com/mig.capable")
    state = ((seen.cluster_policy or {}).get("status") or {}).get("state", "")
    policy_name = ((seen.cluster_policy or {}).get("metadata") or {}).get("name", "")
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


def addons_of(seen: Seen) -> dict[str, bool]:
    """The add-on flags the renderers and admission read (HostCluster.addons), from the same observation."""
    served = {
        "kueue": ("kueue.x-k8s.io", "v1beta2"),
        "kai": ("scheduling.run.ai", "v2"),
        "flux": ("helm.toolkit.fluxcd.io", "v2"),
        "flux_source": ("source.toolkit.fluxcd.io", "v1"),
        "vcluster_platform": ("management.loft.sh", "v1"),
        "cilium": ("cilium.io", "v2"),
        "gpu_operator": ("nvidia.com", "v1"),
        "dra": ("resource.k8s.io", "v1"),
    }
    addons = {name: _served(seen, group, version)[0] for name, (group, version) in served.items()}
    addons["hami"] = any(HAMI_REGISTER in (n["metadata"].get("annotations") or {}) for n in seen.nodes)
    addons["nvidia_dra_driver"] = seen.dra_driver
    return addons
