"""Fleet state for the extender from the host cluster: GPU nodes, tenants' namespaces, and the pods bound.

One pass lists the tenants' host namespaces (those gpucloud labels ``gpucloud.io/tenant``, with their trust
tier), the GPU nodes' MIG instances (allocatable ``nvidia.com/mig-<profile>``), and the GPU nodes' pods (one
list of all pods: no selector picks pods by node label), and hands them to the :class:`Extender` as the
complete picture; a watch on pods from the list's resourceVersion then feeds every change until the server
ends it (``timeoutSeconds``), and the next pass lists again, namespaces and nodes included. Decisions never
wait for either: between events the extender's own bookkeeping (its assumed placements) stands in.

The same lists and events go to the feed's sinks (:class:`PodSink`): the live view of the host cluster
(`placement.live.view.LiveView`) is one, so what the extender books and what the portal, what-if and
billing read come from one feed and one reading of a pod. In the extender process the view is a sink of
this very feed (`placement.extender.service`): one watch per host cluster, the view's lease saying which
process runs it (`placement.live.lease`). With sinks, each pass also lists the cluster's DRA ResourceClaims
(`claims`, `placement.live.claims.ClaimStore`), which the view reads a DRA pod's GPUs from.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

from gpucloud.kube import kinds as k
from gpucloud.kube.api import KubeApi
from gpucloud.kube.errors import DriverError
from gpucloud.kube.meta import SHARED, TENANT, TRUST_TIER
from placement.engine.errors import EngineError
from placement.engine.fleet import NodeSpec, Tier
from placement.extender.gangs import node_topology
from placement.extender.pods import MIG, MODEL_LABEL, BadRequest, ObservedPod, pod_request, quantity
from placement.live.claims import ClaimStore

log = logging.getLogger(__name__)
POD_PATH = "/api/v1/pods"
GPU_COUNT = "nvidia.com/gpu.count"
GPU_INDEX = "gpucloud.io/gpu-index"  # annotation a device plugin may set: "0,1"
DONE = ("Succeeded", "Failed")


def node_spec(node: Mapping[str, Any]) -> NodeSpec:
    """A GPU node as the engine sees it: allocatable CPU and memory, GPU count and product (its model), and
    its place in the topology (zone, block, rack, NVLink clique labels: `placement.extender.gangs`)."""
    meta, status = node.get("metadata") or {}, node.get("status") or {}
    labels, allocatable = meta.get("labels") or {}, status.get("allocatable") or {}
    name = str(meta.get("name"))

    def amount(key: str, scale: int) -> int:
        try:
            return int(quantity(allocatable.get(key, 0), name) * scale)
        except BadRequest:
            return 0  # a malformed figure takes the node out of play rather than the whole fleet

    gpus = amount("nvidia.com/gpu", 1)
    if not gpus and str(labels.get(GPU_COUNT, "")).isdigit():
        gpus = int(labels[GPU_COUNT])
    return NodeSpec(
        name,
        amount("cpu", 1000),
        amount("memory", 1) // 2**20,
        gpus,
        str(labels.get(MODEL_LABEL, "")),
        node_topology(labels),
    )


def node_mig(node: Mapping[str, Any]) -> dict[str, int]:
    """MIG instances a node advertises per profile: its allocatable ``nvidia.com/mig-<profile>`` (the GPU
    Operator's mixed strategy advertises each profile as its own resource). A malformed figure counts 0."""
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    out = {}
    for resource, value in allocatable.items():
        if str(resource).startswith(MIG) and resource != MIG:
            try:
                out[resource.removeprefix(MIG)] = int(quantity(value, resource))
            except BadRequest:
                out[resource.removeprefix(MIG)] = 0
    return out


def namespace_tenant(namespace: Mapping[str, Any]) -> tuple[str, Tier] | None:
    """(tenant slug, trust tier) of a host namespace gpucloud rendered (clusters/render/namespace.py), or
    None.

    A tenant's namespace without a readable tier counts as standard: it shares no GPU with another tenant
    and keeps no other tenant off its nodes.
    """
    labels = (namespace.get("metadata") or {}).get("labels") or {}
    slug = labels.get(TENANT)
    if not isinstance(slug, str) or not slug or slug == SHARED:
        return None
    try:
        return slug, Tier(str(labels.get(TRUST_TIER)))
    except ValueError:
        return slug, Tier.STANDARD


def observed(pod: Mapping[str, Any]) -> ObservedPod | None:
    """A pod holding resources on a node, or None (not bound, finished, or unreadable)."""
    node = (pod.get("spec") or {}).get("nodeName")
    if not node or (pod.get("status") or {}).get("phase") in DONE:
        return None
    try:
        request = pod_request(pod)
    except EngineError as e:
        log.warning("extender skips a pod it cannot read", extra={"error": str(e)})
        return None
    index = ((pod.get("metadata") or {}).get("annotations") or {}).get(GPU_INDEX, "")
    gpus = tuple(int(g) for g in str(index).split(",") if g.strip().isdigit())
    return ObservedPod(request, str(node), gpus)


class PodSink(Protocol):
    """What else the feed hands the host cluster's pods to: every complete list, then every watch event."""

    def listed(
        self, items: list[dict[str, Any]], resource_version: str, asked_at: datetime | None = None
    ) -> None:
        """A complete list of the pods at `resource_version`, asked for at `asked_at`: every change before
        that time is in it."""

    def changed(self, kind: str, item: dict[str, Any]) -> None: ...


class ClusterFeed:
    """Lists and watches one host cluster for an extender and its sinks (see the module docstring)."""

    def __init__(self, api: KubeApi, *, watch_seconds: int = 60, sinks: Sequence[PodSink] = ()) -> None:
        self.api = api
        self.watch_seconds = watch_seconds
        self.sinks = list(sinks)
        self.claims = ClaimStore(api)
        self.passes = 0
        self.events = 0

    def nodes(self) -> list[NodeSpec]:
        """The GPU nodes (those GPU feature discovery labelled with a product), in name order."""
        specs = sorted((node_spec(n) for n in self._gpu_nodes()), key=lambda n: n.name)
        return [n for n in specs if n.gpus]

    def mig(self) -> dict[str, dict[str, int]]:
        """MIG instances per profile of every GPU node, by node name."""
        return {str((n.get("metadata") or {}).get("name")): node_mig(n) for n in self._gpu_nodes()}

    def tenancy(self) -> dict[str, tuple[str, Tier]]:
        """The tenants' host namespaces: namespace -> (tenant slug, trust tier)."""
        listed = self.api.get(k.NAMESPACE.path(), {"labelSelector": TENANT}).get("items") or []
        found = {str((ns.get("metadata") or {}).get("name")): namespace_tenant(ns) for ns in listed}
        return {name: owner for name, owner in found.items() if owner is not None}

    def list_pass(self, extender: Any | None) -> str:
        """One pass: tenants' namespaces, MIG instances, then every bound pod to the extender (booked as its
        namespace's tenant's, so tenancy goes first) and every pod to the sinks; returns the resourceVersion
        to watch pods from."""
        if extender is not None:
            extender.set_tenancy(self.tenancy())
            extender.set_mig_allocatable(self.mig())
        if self.sinks:  # before the pods (a pod's claim made after this list is fetched)
            self.claims.refresh()
        asked_at = datetime.now(UTC)
        listed = self.api.get(POD_PATH)
        items = listed.get("items") or []
        version = str((listed.get("metadata") or {}).get("resourceVersion") or "0")
        if extender is not None:
            pods = [p for p in (observed(item) for item in items) if p is not None]
            extender.observe(pods, complete=True)
            if pods:  # the typical pods of the fragmentation measure: what the cluster runs now
                extender.learn([p.request for p in pods])
        for sink in self.sinks:
            sink.listed(items, version, asked_at)
        self.passes += 1
        return version

    def _gpu_nodes(self) -> list[dict[str, Any]]:
        return self.api.get(k.NODE.path(), {"labelSelector": MODEL_LABEL}).get("items") or []

    def watch(self, extender: Any | None, resource_version: str, stop: threading.Event) -> None:
        """Feed watch events until the server ends the watch (or ``stop`` is set at the next event). A
        resourceVersion too old raises `Gone` (list again)."""
        for event in self.api.watch(
            POD_PATH, resource_version=resource_version, timeout_seconds=self.watch_seconds
        ):
            if stop.is_set():
                return
            self.events += 1
            obj = event.get("object") or {}
            for sink in self.sinks:
                sink.changed(str(event.get("type")), obj)
            if extender is None:
                continue
            meta = obj.get("metadata") or {}
            name = f"{meta.get('namespace') or 'default'}/{meta.get('name')}"
            pod = observed(obj) if event.get("type") in ("ADDED", "MODIFIED") else None
            if pod is not None:
                extender.observe([pod], complete=False)
            elif event.get("type") == "DELETED" or (obj.get("status") or {}).get("phase") in DONE:
                extender.gone(name)

    def run(self, extender: Any, stop: threading.Event, retry_seconds: float = 5.0) -> None:
        """List, watch, repeat, until ``stop``; a failure is logged and retried after ``retry_seconds``."""
        while not stop.is_set():
            try:
                self.watch(extender, self.list_pass(extender), stop)
            except DriverError as e:
                log.warning("extender feed failed; listing again", extra={"error": str(e)})
                stop.wait(retry_seconds)
