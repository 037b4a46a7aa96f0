"""What the GPU Operator shows of a host cluster's GPU nodes, and the two ways gpucloud asks it for
partitions: its ConfigMaps (clusters/render/gpu_operator.py) and node labels.

Node labels are changed with a JSON merge patch of `metadata.labels` (what `kubectl label` sends), so nothing
else on the node is touched. When gpucloud sets `nvidia.com/mig.config` it also sets
`nvidia.com/mig.config.state=pending` in the same patch: the MIG manager overwrites it as it works
(`pending` → `success` | `failed`), and until it does the old `success` must not be read as the new
layout's.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from kubernetes.utils import parse_quantity

from clusters.render.gpu_operator import DISABLED, PREFIX, TIME_SLICED, parse_mig_parted
from fleet import catalog
from gpucloud.kube import kinds as k
from gpucloud.kube.api import KubeApi, NotFound
from gpucloud.kube.meta import SPEC_HASH, Manifest
from gpucloud.kube.nodes import change_node, taint_of, with_taint

PRODUCT = "nvidia.com/gpu.product"
MIG_CONFIG = "nvidia.com/mig.config"
MIG_STATE = "nvidia.com/mig.config.state"
PLUGIN_CONFIG = "nvidia.com/device-plugin.config"
REPLICAS = "nvidia.com/gpu.replicas"
MIG_RESOURCE = "nvidia.com/mig-"
CONFIG_MAP = k.Kind("v1", "ConfigMap", "configmaps", True)
POD = k.Kind("v1", "Pod", "pods", True)
# Keeps new pods off a busy node whose MIG layout must change, until its pods finish and the change is made.
MIG_TAINT = "gpucloud.io/mig-reconfigure"
DONE_PHASES = ("Succeeded", "Failed")
UNFINISHED = "status.phase!=Succeeded,status.phase!=Failed"


@dataclass(frozen=True)
class ObservedNode:
    """A GPU node as GPU feature discovery, the MIG manager and the device plugin label it."""

    name: str
    model: str  # catalog slug, "" when the product is not in the catalog
    gpus: int
    mig_capable: bool
    labels: dict[str, str]
    allocatable: dict[str, int]  # nvidia.com/* resources the node offers now
    busy: bool  # pods that are not finished hold GPU resources (or DRA claims) on it
    pods: int = 0  # how many
    taints: tuple[dict[str, Any], ...] = ()
    resource_version: str = ""

    @property
    def cordoned_for_mig(self) -> bool:
        return any(t.get("key") == MIG_TAINT for t in self.taints)

    @property
    def mig_config(self) -> str:
        return self.labels.get(MIG_CONFIG, "")

    @property
    def mig_state(self) -> str:
        return self.labels.get(MIG_STATE, "")

    @property
    def managed(self) -> bool:
        """Its MIG config is gpucloud's, or the operator's default with no slices set up by hand."""
        if self.mig_config.startswith(PREFIX):
            return True
        hand_made = any(name.startswith(MIG_RESOURCE) for name, units in self.allocatable.items() if units)
        return self.mig_config in ("", DISABLED) and not hand_made

    @property
    def in_flight(self) -> bool:
        return self.mig_state in ("pending", "rebooting")

    @property
    def sharing(self) -> bool:
        return self.labels.get(PLUGIN_CONFIG) == TIME_SLICED


@dataclass
class OperatorView:
    """One read of the partitioning state of a host cluster: GPU nodes and gpucloud's two ConfigMaps."""

    nodes: list[ObservedNode] = field(default_factory=list)
    mig_configs: dict[str, dict[int, tuple[str, ...]]] = field(default_factory=dict)
    live: dict[str, Manifest | None] = field(default_factory=dict)  # ConfigMap name -> live object


def model_for_product(product: str) -> str:
    wanted = product.lower().replace(" ", "-")
    for spec in catalog.GPU_MODELS:
        label = spec.product_label.lower()
        if wanted == label or wanted.startswith(label + "-"):
            return spec.slug
    return ""


def _units(value: Any) -> int:
    try:
        return max(0, int(parse_quantity(value) / Decimal(1)))
    except (ValueError, TypeError, ArithmeticError):
        return 0


def _holds_gpu(pod: Manifest) -> bool:
    spec = pod.get("spec") or {}
    if (pod.get("status") or {}).get("phase") in DONE_PHASES or not spec.get("nodeName"):
        return False
    if spec.get("resourceClaims"):
        return True
    for container in spec.get("containers") or []:
        resources = container.get("resources") or {}
        asked = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
        if any(name.startswith("nvidia.com/") and _units(v) for name, v in asked.items()):
            return True
    return False


class GpuOperatorClient:
    """Reads GPU nodes, pods and gpucloud's ConfigMaps; writes ConfigMaps and node labels."""

    def __init__(self, api: KubeApi, namespace: str) -> None:
        self.api = api
        self.namespace = namespace

    def observe(self, configmaps: tuple[str, str]) -> OperatorView:
        """Nodes with `nvidia.com/gpu.product`, which of them run GPU pods, and the two ConfigMaps."""
        view = OperatorView()
        # Finished pods hold nothing: the API server leaves them out (the phase is checked again below).
        listed = self.api.get(POD.path(), {"fieldSelector": UNFINISHED}).get("items") or []
        pods = [pod for pod in listed if _holds_gpu(pod)]
        busy = Counter(pod["spec"]["nodeName"] for pod in pods)
        for node in self.api.get(k.NODE.path(), {"labelSelector": PRODUCT}).get("items") or []:
            labels = node["metadata"].get("labels") or {}
            allocatable = (node.get("status") or {}).get("allocatable") or {}
            view.nodes.append(
                ObservedNode(
                    name=node["metadata"]["name"],
                    model=model_for_product(labels.get(PRODUCT, "")),
                    gpus=_units(labels.get("nvidia.com/gpu.count", "0")),
                    mig_capable=labels.get("nvidia.com/mig.capable") == "true",
                    labels=dict(labels),
                    allocatable={n: _units(v) for n, v in allocatable.items() if n.startswith("nvidia.com/")},
                    busy=node["metadata"]["name"] in busy,
                    pods=busy[node["metadata"]["name"]],
                    taints=tuple((node.get("spec") or {}).get("taints") or ()),
                    resource_version=node["metadata"].get("resourceVersion", ""),
                )
            )
        for name in configmaps:
            try:
                view.live[name] = self.api.get(CONFIG_MAP.path(self.namespace, name))
            except NotFound:
                view.live[name] = None
        mig = view.live.get(configmaps[0])
        if mig is not None:
            view.mig_configs = parse_mig_parted(((mig.get("data") or {}).get("config.yaml")) or "")
        return view

    def apply(self, manifest: Manifest, live: Manifest | None) -> bool:
        """Server-side apply a ConfigMap unless the live one has this content already; whether it wrote."""
        if live is not None:
            hash_ = ((live.get("metadata") or {}).get("annotations") or {}).get(SPEC_HASH)
            if (
                hash_ == manifest["metadata"]["annotations"][SPEC_HASH]
                and live.get("data") == manifest["data"]
            ):
                return False
        self.api.apply(CONFIG_MAP.object_path(manifest), manifest)
        return True

    def cordon_for_mig(self, node: ObservedNode, on: bool) -> None:
        """Add or remove gpucloud's NoSchedule taint through the one node writer (`gpucloud.kube.nodes`):
        conditional on the version read in this pass, recomputed from a fresh read if the node changed since,
        every other taint (the quarantine, a dedication) kept."""
        wanted = {"key": MIG_TAINT, "value": "pending", "effect": "NoSchedule"} if on else None

        def change(obj: Manifest) -> dict[str, Any]:
            if (taint_of(obj, MIG_TAINT) is not None) == on:
                return {}
            return {"spec": {"taints": with_taint(obj, MIG_TAINT, wanted)}}

        meta = {"name": node.name, "resourceVersion": node.resource_version}
        change_node(self.api, {"metadata": meta, "spec": {"taints": list(node.taints)}}, change)

    def label(self, node: str, labels: dict[str, str | None]) -> None:
        """Set (or, with None, remove) node labels with a merge patch."""
        self.api.request(
            "PATCH",
            k.NODE.path(name=node),
            body={"metadata": {"labels": labels}},
            content_type="application/merge-patch+json",
        )


def advertised(node: ObservedNode, count_mig: bool) -> dict[str, int]:
    """Units per GPU class the node offers now. MIG slices only when `count_mig` (its layout is settled:
    `success`, or never changed by gpucloud); shared units as `nvidia.com/gpu.count` ×
    `nvidia.com/gpu.replicas` on time-sliced nodes."""
    if not node.model:
        return {}
    out: dict[str, int] = {}
    whole = node.allocatable.get("nvidia.com/gpu", 0)
    replicas = _units(node.labels.get(REPLICAS, "1")) or 1
    if node.sharing and replicas > 1:
        out[f"{node.model}.shared"] = node.gpus * replicas
    elif whole:
        out[node.model] = whole
    if count_mig:
        for name, units in node.allocatable.items():
            if name.startswith(MIG_RESOURCE) and units:
                out[f"{node.model}.mig-{name.removeprefix(MIG_RESOURCE)}"] = units
    return out
