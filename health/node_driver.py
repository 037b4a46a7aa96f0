"""A Kubernetes host cluster's GPU nodes as health sees them, and the quarantine gpucloud puts on them.

Reads every GPU node once per pass (one list): the Ready condition and every other condition (Node Problem
Detector's, NVSentinel's). Acts by level: a node quarantined whole is cordoned (`spec.unschedulable`) and
tainted `gpucloud.io/quarantine=<reason>:NoSchedule`; a node with some GPUs out carries their indices in an
annotation; a node back in service loses the taint, and is uncordoned only if gpucloud cordoned it. Draining
(evictions through the Eviction API, so PodDisruptionBudgets hold) is off unless asked. A node already as
desired costs no write. See `docs/health.md`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from kubernetes import client

from gpucloud.kube import kinds as k
from gpucloud.kube.api import ApiStatusError, KubeApi, NotFound, RetryPolicy
from gpucloud.kube.errors import TemporaryDriverError
from gpucloud.kube.meta import Manifest
from gpucloud.kube.nodes import change_node

GPU_PRODUCT = "nvidia.com/gpu.product"
TAINT_KEY = "gpucloud.io/quarantine"
CORDONED = "gpucloud.io/cordoned"  # "true" when gpucloud set spec.unschedulable, so it may unset it
REASON = "gpucloud.io/quarantine-reason"
GPUS_OUT = "gpucloud.io/quarantined-gpus"


@dataclass(frozen=True)
class NodeHealth:
    """One GPU node as listed: its conditions and what of gpucloud's quarantine it carries."""

    name: str
    ready: str  # the Ready condition's status: True, False, Unknown ("" when it has none)
    conditions: dict[str, tuple[str, str]]  # every other condition: type -> (status, "reason: message")
    unschedulable: bool
    taints: tuple[dict[str, Any], ...]
    annotations: dict[str, str]
    resource_version: str = ""
    pods_evicted: int = 0

    @property
    def our_taint(self) -> dict[str, Any] | None:
        return next((t for t in self.taints if t.get("key") == TAINT_KEY), None)


@dataclass
class QuarantineResult:
    """What one pass did on the cluster."""

    writes: int = 0
    evictions: int = 0
    blocked: list[str] = field(default_factory=list)  # pods a PodDisruptionBudget kept, for the next pass


def _node(obj: Mapping[str, Any]) -> NodeHealth:
    meta, spec, status = obj["metadata"], obj.get("spec") or {}, obj.get("status") or {}
    conditions = {}
    ready = ""
    for c in status.get("conditions") or []:
        if c.get("type") == "Ready":
            ready = str(c.get("status", ""))
        else:
            text = ": ".join(part for part in (c.get("reason", ""), c.get("message", "")) if part)
            conditions[str(c.get("type"))] = (str(c.get("status", "")), text)
    return NodeHealth(
        name=meta["name"],
        ready=ready,
        conditions=conditions,
        unschedulable=bool(spec.get("unschedulable")),
        taints=tuple(spec.get("taints") or ()),
        annotations=dict(meta.get("annotations") or {}),
        resource_version=str(meta.get("resourceVersion", "")),
    )


class NodeHealthDriver:
    """Lists a host cluster's GPU nodes and puts gpucloud's quarantine on them (or takes it off)."""

    def __init__(self, api_client: client.ApiClient, *, retry: RetryPolicy | None = None) -> None:
        self.api = KubeApi(api_client, retry)

    def close(self) -> None:
        self.api.api_client.close()

    def list_nodes(self) -> list[NodeHealth]:
        """Every GPU node (one list request)."""
        items = self.api.get(k.NODE.path(), {"labelSelector": GPU_PRODUCT}).get("items") or []
        return [_node(item) for item in items]

    def apply(
        self,
        nodes: Sequence[NodeHealth],
        quarantined: Mapping[str, str],
        gpus_out: Mapping[str, Sequence[int]],
        *,
        drain: bool = False,
    ) -> QuarantineResult:
        """Make each node carry what is desired: `quarantined` maps node → reason, `gpus_out` node → GPUs."""
        result = QuarantineResult()
        for node in nodes:
            reason, out = quarantined.get(node.name), gpus_out.get(node.name, ())
            # Through the one node writer (`gpucloud.kube.nodes`): conditional on the version listed, and
            # recomputed from a fresh read if another writer (the dedication pass, a person) got there first,
            # so neither drops the other's taint.
            if change_node(self.api, _manifest(node), partial(_change, reason=reason, gpus_out=out)):
                result.writes += 1
            if drain and node.name in quarantined:
                self._drain(node.name, result)
        return result

    def _drain(self, node: str, result: QuarantineResult) -> None:
        """Evict the node's pods through the Eviction API, which refuses (429) what a PodDisruptionBudget
        protects; those are tried again at the next pass. DaemonSet pods and mirror pods stay, as kubectl
        drain leaves them."""
        pods = self.api.get("/api/v1/pods", {"fieldSelector": f"spec.nodeName={node}"}).get("items") or []
        for pod in pods:
            meta = pod["metadata"]
            owners = meta.get("ownerReferences") or []
            if any(o.get("kind") == "DaemonSet" for o in owners) or "kubernetes.io/config.mirror" in (
                meta.get("annotations") or {}
            ):
                continue
            if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                continue
            eviction = {
                "apiVersion": "policy/v1",
                "kind": "Eviction",
                "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
            }
            path = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/eviction"
            try:
                self.api.request("POST", path, body=eviction, content_type="application/json")
                result.evictions += 1
            except NotFound:
                continue
            except (ApiStatusError, TemporaryDriverError):
                result.blocked.append(f"{meta['namespace']}/{meta['name']}")


def _change(obj: Manifest, *, reason: str | None, gpus_out: Sequence[int]) -> dict[str, Any]:
    return _patch(_node(obj), reason, gpus_out)


def _manifest(node: NodeHealth) -> Manifest:
    """The parts of a listed node that `_patch` reads, as a Node object (to start a read-modify-write)."""
    meta = {
        "name": node.name,
        "resourceVersion": node.resource_version,
        "annotations": dict(node.annotations),
    }
    return {"metadata": meta, "spec": {"unschedulable": node.unschedulable, "taints": list(node.taints)}}


def _patch(node: NodeHealth, reason: str | None, gpus_out: Sequence[int]) -> dict[str, Any]:
    """The merge patch that makes `node` carry the desired quarantine; {} when it already does."""
    meta: dict[str, Any] = {}
    spec: dict[str, Any] = {}
    others = [t for t in node.taints if t.get("key") != TAINT_KEY]
    if reason is not None:
        taint = {"key": TAINT_KEY, "value": reason, "effect": "NoSchedule"}
        if node.our_taint != taint:
            spec["taints"] = [*others, taint]
        if not node.unschedulable:
            spec["unschedulable"] = True
            meta[CORDONED] = "true"
        if node.annotations.get(REASON) != reason:
            meta[REASON] = reason
    else:
        if node.our_taint is not None:
            spec["taints"] = others or None
        if node.annotations.get(CORDONED) == "true":
            spec["unschedulable"] = None  # only a cordon gpucloud made is lifted
            meta[CORDONED] = None
        if REASON in node.annotations:
            meta[REASON] = None
    wanted = ",".join(str(i) for i in sorted(gpus_out)) or None
    if node.annotations.get(GPUS_OUT) != wanted:
        meta[GPUS_OUT] = wanted
    if not meta and not spec:
        return {}
    patch: dict[str, Any] = {"metadata": {"annotations": meta} if meta else {}}
    if spec:
        patch["spec"] = spec
    return patch
