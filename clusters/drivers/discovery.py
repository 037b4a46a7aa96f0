"""What a Kubernetes host cluster runs, read in one place: registration and every reconcile pass use it.

`discover` reads the server version, the served API groups, the GPU nodes, the DRA DeviceClasses, which
versions of admissionregistration.k8s.io serve MutatingAdmissionPolicies and the API server's own addresses;
for the conformance report (`clusters.drivers.conformance`, re-checked on every pass) it also reads the GPU
Operator's ClusterPolicy, Kueue's controller Deployment and configuration, whether it may patch nodes and
read Kueue's visibility API (thirteen requests at most). The add-on flags the renderers and admission read
(`HostCluster.addons`), every GPU resource name the cluster offers (`HostCluster.gpu_resources`: what each
tenant's ResourceQuota names) and the GPU nodes the fleet imports are derived from that one
`ClusterDiscovery`. `check_profile` refuses a profile the cluster cannot serve.

Not a driver: the drivers import it, it imports none of them.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import yaml

from clusters.drivers.quantities import count, quantity
from clusters.render import ClusterProfile
from clusters.render.dra import DEVICE_COUNT, device_class_name
from clusters.spec import QuotaSpec
from fleet import catalog
from gpucloud.kube import kinds as k
from gpucloud.kube.api import ApiStatusError, KubeApi, NotFound
from gpucloud.kube.errors import DriverError, PermanentDriverError
from gpucloud.kube.meta import Manifest

__all__ = [
    "ADDONS",
    "ClusterDiscovery",
    "GpuNode",
    "UnsupportedCluster",
    "check_profile",
    "check_scheduler",
    "discover",
    "missing_resources",
]

# Group/version each add-on serves once its CRDs are installed.
ADDONS: dict[str, tuple[str, str]] = {
    "kueue": ("kueue.x-k8s.io", "v1beta2"),
    "kai": ("scheduling.run.ai", "v2"),
    "flux": ("helm.toolkit.fluxcd.io", "v2"),
    "flux_source": ("source.toolkit.fluxcd.io", "v1"),
    "vcluster_platform": ("management.loft.sh", "v1"),
    "cilium": ("cilium.io", "v2"),
    "gpu_operator": ("nvidia.com", "v1"),
    "dra": ("resource.k8s.io", "v1"),
    # Inference endpoints (clusters/render/inference.py): routes on a Gateway, pools of the Inference
    # Extension, and KServe's LLMInferenceService where it runs the model servers.
    "gateway_api": ("gateway.networking.k8s.io", "v1"),
    "inference_extension": ("inference.networking.k8s.io", "v1"),
    "kserve": ("serving.kserve.io", "v1alpha2"),
    # KAI's Topology CRD (the only kind of kai.scheduler/v1alpha1): topology-aware placement on KAI clusters.
    "kai_topology": ("kai.scheduler", "v1alpha1"),
}
NVLINK_CLIQUE = "nvidia.com/gpu.clique"  # GPU feature discovery's NVLink domain label
CLUSTER_POLICY = k.Kind("nvidia.com/v1", "ClusterPolicy", "clusterpolicies", False)
DRA_DRIVER = "gpu.nvidia.com"  # NVIDIA's DRA driver installs a DeviceClass of its driver's name
GPU_PRODUCT = "nvidia.com/gpu.product"
HAMI_REGISTER = "hami.io/node-nvidia-register"  # HAMi's device plugin annotates the GPU nodes it serves
SELF_SUBJECT_ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
KUEUE_SELECTOR = "app.kubernetes.io/name=kueue"  # the Kueue chart's controller Deployment
# Kueue's Configuration: this ConfigMap in the controller's namespace, under this key (the chart's and
# the release manifests' names).
KUEUE_CONFIG, KUEUE_CONFIG_KEY = "kueue-manager-config", "controller_manager_config.yaml"
ADMISSION = "admissionregistration.k8s.io"
MUTATING_POLICY_VERSIONS = ("v1", "v1beta1")
HAMI_RESOURCES = (catalog.HAMI_RESOURCE, catalog.HAMI_MEMORY, catalog.HAMI_CORES)
API_SERVER_SLICES = k.Kind("discovery.k8s.io/v1", "EndpointSlice", "endpointslices", True)
API_SERVER_ENDPOINTS = k.Kind("v1", "Endpoints", "endpoints", True)
API_SERVER_SERVICE = "kubernetes.io/service-name=kubernetes"  # the API server's own Service in `default`
TOPOLOGY_HINTS = ("topology", "kubernetes.io/hostname")


class UnsupportedCluster(PermanentDriverError):
    """The host cluster cannot serve what was asked of it (a scheduler, a vCluster mode)."""


@dataclass(frozen=True)
class GpuNode:
    """A node with NVIDIA GPUs, as GPU feature discovery labels it."""

    name: str
    product: str
    count: int
    memory_mib: int
    mig_capable: bool
    labels: dict[str, str]
    topology: dict[str, str]  # topology-ish labels: zone, block, rack, hostname…
    allocatable: dict[str, str]  # nvidia.com/* extended resources the node offers
    allocatable_cpu_milli: int = 0  # CPU the node offers to pods (status.allocatable.cpu), in millicores
    allocatable_memory_mib: int = 0  # memory it offers to pods (status.allocatable.memory), in MiB


@dataclass(frozen=True)
class ClusterDiscovery:
    """What a host cluster runs, as read by `discover`: the raw observations, and what follows from them."""

    server_version: str
    groups: dict[str, tuple[str, ...]]
    nodes: list[Manifest]  # the GPU nodes (labelled with a product), as listed
    dra_driver: bool  # resource.k8s.io/v1 is served and NVIDIA's DRA DeviceClass exists
    cluster_policy: Manifest | None = None  # the GPU Operator's; read for the conformance report only
    kueue_image: str = ""  # the Kueue controller's image, whose tag is its version; conformance report only
    device_classes: tuple[Manifest, ...] = ()  # every DeviceClass (resource.k8s.io/v1), as listed
    # Kueue's Configuration as parsed from its ConfigMap; None when not read or not found (conformance only).
    kueue_config: dict[str, Any] | None = None
    # The admissionregistration.k8s.io versions serving MutatingAdmissionPolicies (beta in 1.34 behind a
    # feature gate, GA in 1.36): on KAI clusters they give tenant pods their queue and scheduler name.
    mutating_policies: tuple[str, ...] = ()
    # The API server's own addresses as /32 or /128 CIDRs (the `kubernetes` Service's endpoints in
    # `default`); empty when they could not be read. Tenants' egress policies deny them
    # (`ClusterProfile.api_server_cidrs`).
    api_server_cidrs: tuple[str, ...] = ()
    # Whether the GPU nodes were listed: a soft read that failed lists none, which must not read as "all gone"
    # to the node sync (clusters/node_sync.py).
    nodes_listed: bool = True
    # Whether gpucloud's identity may patch nodes (a SelfSubjectAccessReview), None when the cluster did not
    # answer one; the conformance report only (dedicated nodes and the quarantine write node taints).
    node_patch: bool | None = None
    # Whether it may read Kueue's pending workloads (`localqueues/pendingworkloads` of the visibility API), by
    # a SelfSubjectAccessReview asked only where that API is served; None otherwise (conformance only).
    pending_workloads_read: bool | None = None

    def serves(self, group: str, version: str) -> bool:
        return version in self.groups.get(group, ())

    @property
    def addons(self) -> dict[str, bool]:
        """The add-on flags the renderers and admission read (`HostCluster.addons`)."""
        addons = {name: self.serves(group, version) for name, (group, version) in ADDONS.items()}
        addons["hami"] = any(HAMI_REGISTER in (n["metadata"].get("annotations") or {}) for n in self.nodes)
        addons["nvidia_dra_driver"] = self.dra_driver
        addons["nvlink_domains"] = any(
            NVLINK_CLIQUE in (n["metadata"].get("labels") or {}) for n in self.nodes
        )
        for version in MUTATING_POLICY_VERSIONS:
            addons[f"mutating_admission_policy_{version}"] = version in self.mutating_policies
        return addons

    @property
    def gpu_nodes(self) -> tuple[GpuNode, ...]:
        return tuple(_gpu_node(node) for node in self.nodes)

    def resource_names(self) -> set[str]:
        """Every GPU resource name some node offers (`nvidia.com/gpu`, `nvidia.com/mig-1g.18gb`…)."""
        return {name for node in self.gpu_nodes for name in node.allocatable}

    def gpu_resources(self) -> tuple[str, ...]:
        """Every name a pod can ask for GPUs by here, whoever holds them: what each tenant's ResourceQuota
        names (0 where the tenant holds none). The nodes' `nvidia.com/*` extended resources; HAMi's three
        where HAMi serves the nodes (its memory and cores are not node allocatable, but pods ask for
        them); and the device count of every DeviceClass that selects NVIDIA's GPU driver's devices
        (NVIDIA's own `gpu.nvidia.com`/`mig.nvidia.com` as much as gpucloud's per-class ones), since a
        claim on any of them reaches a GPU."""
        hami, dra = self.addons["hami"], self.addons["dra"] and self.dra_driver
        names = self.resource_names() | (set(HAMI_RESOURCES) if hami else set())
        classes = set(gpu_device_classes(self.device_classes))
        # What the nodes' models can be made to offer too (the MIG manager and time-slicing change what a
        # node advertises from pass to pass), and the DeviceClasses gpucloud renders for them.
        for model in filter(None, (catalog.model_for_product(n.product) for n in self.gpu_nodes)):
            names |= catalog.resource_names_of(model, hami=hami)
            if dra:
                classes |= {
                    device_class_name(c.name)
                    for c in catalog.classes_of(model)
                    if c.kind in (catalog.WHOLE, catalog.MIG)
                }
        return tuple(sorted(names | {f"{name}{DEVICE_COUNT}" for name in classes}))


def _gpu_node(node: Manifest) -> GpuNode:
    labels = node.get("metadata", {}).get("labels") or {}
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    return GpuNode(
        name=node["metadata"]["name"],
        product=labels.get(GPU_PRODUCT, ""),
        count=count(labels.get("nvidia.com/gpu.count")),
        memory_mib=count(labels.get("nvidia.com/gpu.memory")),
        mig_capable=labels.get("nvidia.com/mig.capable") == "true",
        labels=dict(labels),
        topology={key: value for key, value in labels.items() if any(h in key for h in TOPOLOGY_HINTS)},
        allocatable={key: str(value) for key, value in allocatable.items() if key.startswith("nvidia.com/")},
        allocatable_cpu_milli=quantity(allocatable.get("cpu"), Decimal("0.001")),
        allocatable_memory_mib=quantity(allocatable.get("memory"), Decimal(2**20)),
    )


def gpu_device_classes(classes: Iterable[Manifest]) -> list[str]:
    """Names of the DeviceClasses whose selectors pick devices of NVIDIA's GPU driver (`gpu.nvidia.com`),
    or that gpucloud renders (`gpucloud-…`)."""
    names = []
    for device_class in classes:
        name = device_class["metadata"]["name"]
        selectors = (device_class.get("spec") or {}).get("selectors") or []
        expressions = " ".join(str((s.get("cel") or {}).get("expression", "")) for s in selectors)
        if name == DRA_DRIVER or name.startswith("gpucloud-") or f"'{DRA_DRIVER}'" in expressions:
            names.append(name)
    return names


def _soft(api: KubeApi) -> Callable[..., Any]:
    """A read that answers None when it fails, but for 401 (the credentials: every read would fail)."""

    def get(path: str, query: dict[str, str] | None = None) -> Any:
        try:
            return api.get(path, query)
        except NotFound:
            return None
        except ApiStatusError as exc:
            if exc.status == 401:
                raise
            return None

    return get


def _kueue(get: Callable[..., Any]) -> tuple[str, dict[str, Any] | None]:
    """Kueue's controller image and its Configuration (from the ConfigMap in the controller's namespace)."""
    image, namespace = "", ""
    deployments = get("/apis/apps/v1/deployments", {"labelSelector": KUEUE_SELECTOR}) or {}
    for item in deployments.get("items") or []:
        containers = ((item.get("spec") or {}).get("template") or {}).get("spec", {}).get("containers") or []
        found = next((c.get("image", "") for c in containers if "kueue" in c.get("image", "")), "")
        if found:
            image, namespace = found, item["metadata"].get("namespace", "")
    if not namespace:
        return image, None
    configmap = get(f"/api/v1/namespaces/{namespace}/configmaps/{KUEUE_CONFIG}") or {}
    try:
        config = yaml.safe_load((configmap.get("data") or {}).get(KUEUE_CONFIG_KEY) or "")
    except yaml.YAMLError:
        config = None
    return image, config if isinstance(config, dict) else None


def _mutating_policies(get: Callable[..., Any], groups: dict[str, tuple[str, ...]]) -> tuple[str, ...]:
    """The versions of admissionregistration.k8s.io whose resources include mutatingadmissionpolicies."""
    served = []
    for version in MUTATING_POLICY_VERSIONS:
        if version in groups.get(ADMISSION, ()):
            resources = (get(f"/apis/{ADMISSION}/{version}") or {}).get("resources") or []
            if any(r.get("name") == "mutatingadmissionpolicies" for r in resources):
                served.append(version)
    return tuple(served)


def _endpoint_addresses(slices: Any) -> list[str]:
    addresses: list[str] = []
    for item in (slices or {}).get("items") or []:
        if item.get("addressType") not in ("IPv4", "IPv6"):
            continue  # FQDN endpoints name no address a NetworkPolicy could deny
        for endpoint in item.get("endpoints") or []:  # ready or not: an API server all the same
            addresses += endpoint.get("addresses") or []
    return addresses


def _api_server_cidrs(api: KubeApi) -> tuple[str, ...]:
    """The `kubernetes` Service's endpoints: the EndpointSlices the API server keeps for itself, else the
    Endpoints object (clusters whose EndpointSlice mirroring is off). A read that fails counts as none:
    the rest of discovery does not depend on it, and the conformance report says it is missing."""
    get = _soft(api)
    addresses = _endpoint_addresses(
        get(API_SERVER_SLICES.path("default"), {"labelSelector": API_SERVER_SERVICE})
    )
    if not addresses:
        endpoints = get(API_SERVER_ENDPOINTS.path("default", "kubernetes")) or {}
        for subset in endpoints.get("subsets") or []:
            addresses += [a["ip"] for a in subset.get("addresses") or [] if a.get("ip")]
    networks = set()
    for address in addresses:
        try:
            networks.add(ipaddress.ip_network(address))
        except ValueError:
            continue  # not an address: nothing to deny
    return tuple(str(n) for n in sorted(networks, key=lambda n: (n.version, n)))


def discover(api: KubeApi, *, conformance: bool = False) -> ClusterDiscovery:
    """Server version, served API groups (which add-ons are installed), GPU nodes, NVIDIA's DRA driver and
    the API server's addresses.

    Registration asks for exactly that, and any failed read but the API server's addresses fails it. With
    `conformance` (the re-check on every reconcile pass) it also reads the GPU Operator's ClusterPolicy and
    Kueue's controller image, and a read past the API groups that fails (but for 401) counts as nothing
    found, so that one missing permission does not hide the rest of the report.
    """
    get = _soft(api) if conformance else api.get
    version = api.get("/version") or {}
    groups = {
        group["name"]: tuple(v["version"] for v in group.get("versions") or [])
        for group in (api.get("/apis").get("groups") or [])
    }
    listed = get(k.NODE.path(), {"labelSelector": GPU_PRODUCT})
    nodes = (listed or {}).get("items") or []
    policy = None
    if conformance and "v1" in groups.get("nvidia.com", ()):
        items = (get(CLUSTER_POLICY.path()) or {}).get("items") or []
        policy = items[0] if items else None
    classes: list[Manifest] = []
    dra_group, dra_version = ADDONS["dra"]
    if dra_version in groups.get(dra_group, ()):
        classes = (get(k.DEVICE_CLASS.path()) or {}).get("items") or []
    dra = any(c["metadata"]["name"] == DRA_DRIVER for c in classes)
    image, config = _kueue(get) if conformance and "kueue.x-k8s.io" in groups else ("", None)
    mutating = _mutating_policies(get, groups)
    return ClusterDiscovery(
        version.get("gitVersion", ""),
        groups,
        nodes,
        dra,
        policy,
        image,
        tuple(classes),
        config,
        mutating,
        _api_server_cidrs(api),
        nodes_listed=listed is not None,
        node_patch=may_patch_nodes(api) if conformance else None,
        pending_workloads_read=(
            may(api, "get", "localqueues", group=k.KUEUE_VISIBILITY, subresource="pendingworkloads")
            if conformance and k.KUEUE_VISIBILITY in groups
            else None
        ),
    )


def may_patch_nodes(api: KubeApi) -> bool | None:
    """Whether gpucloud's identity may patch nodes (`may`)."""
    return may(api, "patch", "nodes")


def may(api: KubeApi, verb: str, resource: str, *, group: str = "", subresource: str = "") -> bool | None:
    """Whether gpucloud's identity may `verb` a resource (in any namespace), by a SelfSubjectAccessReview
    (authorization.k8s.io/v1; it creates nothing); None when the cluster does not answer one. Asked through a
    KubeApi of its own, so that the driver's count of writes stays a count of changes."""
    attributes = {"verb": verb, "resource": resource}
    attributes.update({k: v for k, v in (("group", group), ("subresource", subresource)) if v})
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": attributes},
    }
    try:
        answer = KubeApi(api.api_client, api.retry).request(
            "POST", SELF_SUBJECT_ACCESS_REVIEWS, body=review, content_type="application/json"
        )
    except DriverError:
        return None
    allowed = ((answer or {}).get("status") or {}).get("allowed")
    return allowed if isinstance(allowed, bool) else None


def missing_resources(discovery: ClusterDiscovery, quotas: Iterable[QuotaSpec]) -> set[str]:
    """Resource names quotas ask for that no GPU node of the cluster offers (nothing could ever use them)."""
    return {quota.resource_name for quota in quotas} - discovery.resource_names()


def check_scheduler(discovery: ClusterDiscovery, scheduler: str) -> None:
    """Refuse a scheduler the cluster does not run, saying what is missing."""
    if scheduler == "kueue":
        if not discovery.addons["kueue"]:
            served = discovery.groups.get("kueue.x-k8s.io")
            detail = (
                f"it serves kueue.x-k8s.io {', '.join(served)} only" if served else "Kueue is not installed"
            )
            raise UnsupportedCluster(f"scheduler kueue needs kueue.x-k8s.io/v1beta2 (Kueue 0.15+): {detail}")
    elif scheduler == "kai":
        if not discovery.addons["kai"]:
            raise UnsupportedCluster(
                "scheduler kai needs scheduling.run.ai/v2 Queues: KAI Scheduler is not installed"
            )
    else:
        raise UnsupportedCluster(f"unknown scheduler {scheduler!r}: choose kueue or kai")


def check_profile(discovery: ClusterDiscovery, profile: ClusterProfile) -> None:
    """Refuse a profile the cluster cannot serve: its scheduler and its way of installing vClusters."""
    check_scheduler(discovery, profile.scheduler)
    if profile.vcluster_mode == "helmrelease" and not (
        discovery.addons["flux"] and discovery.addons["flux_source"]
    ):
        raise UnsupportedCluster(
            "vCluster mode helmrelease needs Flux (helm.toolkit.fluxcd.io/v2, "
            "source.toolkit.fluxcd.io/v1): Flux is not installed"
        )
    if profile.vcluster_mode == "platform" and not discovery.addons["vcluster_platform"]:
        raise UnsupportedCluster(
            "vCluster mode platform needs management.loft.sh/v1: vCluster Platform is not connected"
        )
    if profile.cilium and not discovery.addons["cilium"]:
        raise UnsupportedCluster("cilium is set but the cluster does not serve cilium.io/v2")
