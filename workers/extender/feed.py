"""Fleet state for the extender from the host cluster: GPU nodes, and the pods bound to them.

One pass lists the GPU nodes' pods (one list of all pods: no selector picks pods by node label) and hands
them to the :class:`Extender` as the complete picture; a watch from the list's resourceVersion then feeds
every change until the server ends it (``timeoutSeconds``), and the next pass lists again. Decisions never
wait for either: between events the extender's own bookkeeping (its assumed placements) stands in.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import Any

from scheduling.engine.errors import EngineError
from scheduling.engine.extender import MODEL_LABEL, BadRequest, ObservedPod, pod_request, quantity
from scheduling.engine.fleet import NodeSpec
from workers.drivers.base import DriverError
from workers.kube import kinds as k
from workers.kube.api import KubeApi

log = logging.getLogger(__name__)
POD_PATH = "/api/v1/pods"
GPU_COUNT = "nvidia.com/gpu.count"
GPU_INDEX = "gpucloud.io/gpu-index"  # annotation a device plugin may set: "0,1"
DONE = ("Succeeded", "Failed")


def node_spec(node: Mapping[str, Any]) -> NodeSpec:
    """A GPU node as the engine sees it: allocatable CPU and memory, GPU count and product (its model)."""
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
        name, amount("cpu", 1000), amount("memory", 1) // 2**20, gpus, str(labels.get(MODEL_LABEL, ""))
    )


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


class ClusterFeed:
    """Lists and watches one host cluster for an extender (see the module docstring)."""

    def __init__(self, api: KubeApi, *, watch_seconds: int = 60) -> None:
        self.api = api
        self.watch_seconds = watch_seconds
        self.passes = 0
        self.events = 0

    def nodes(self) -> list[NodeSpec]:
        """The GPU nodes (those GPU feature discovery labelled with a product), in name order."""
        listed = self.api.get(k.NODE.path(), {"labelSelector": MODEL_LABEL}).get("items") or []
        specs = sorted((node_spec(n) for n in listed), key=lambda n: n.name)
        return [n for n in specs if n.gpus]

    def list_pass(self, extender: Any) -> str:
        """One list: every bound pod to the extender; returns the resourceVersion to watch from."""
        listed = self.api.get(POD_PATH)
        pods = [p for p in (observed(item) for item in listed.get("items") or []) if p is not None]
        extender.observe(pods, complete=True)
        if pods:  # the typical pods of the fragmentation measure: what the cluster runs now
            extender.learn([p.request for p in pods])
        self.passes += 1
        return str((listed.get("metadata") or {}).get("resourceVersion") or "0")

    def watch(self, extender: Any, resource_version: str, stop: threading.Event) -> None:
        """Feed watch events until the server ends the watch (or ``stop`` is set at the next event)."""
        for event in self.api.watch(
            POD_PATH, resource_version=resource_version, timeout_seconds=self.watch_seconds
        ):
            if stop.is_set():
                return
            self.events += 1
            obj = event.get("object") or {}
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
