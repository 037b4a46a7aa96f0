"""Reader of HAMi's allocation metrics, for billing HAMi fractions on Kubernetes host clusters.

dcgm-exporter cannot map HAMi's vGPU pods to the GPU they share (HAMi #112): their device rows come without
pod labels. HAMi's scheduler knows: its exporter (``hami-scheduler`` service, port 31993, ``/metrics``)
emits, per container and device, the GPU memory HAMi allocated to it, and per device the memory HAMi
manages. This module reads those families; the ingest service adds the pods to the devices DCGM reports.

The names and labels are those of HAMi's scheduler collector, ``cmd/scheduler/metrics.go`` of
Project-HAMi/HAMi (``ClusterManagerCollector.Collect``), plus the family the v2.7 docs list
(website ``versioned_docs/version-v2.7.0/userguide/monitoring/device-allocation.md``):

- ``hami_vgpu_memory_allocated_bytes{namespace,node,pod,container_index,device_uuid,zone}`` (current names)
- ``vGPUMemoryAllocated{podnamespace,nodename,podname,containeridx,deviceuuid,zone}`` (legacy names, still
  emitted with ``--legacy-metrics``)
- ``vGPUPodsDeviceAllocated{podnamespace,nodename,podname,containeridx,deviceuuid,deviceusedcore,zone}``
  (v2.7 and before, deprecated in v2.8)
- ``hami_gpu_memory_limit_bytes{node,device_uuid,device_index,device_type,zone}`` and the legacy
  ``GPUDeviceMemoryLimit{nodeid,deviceuuid,deviceidx,devicetype,zone}``: the device's memory, in bytes.

When a scheduler emits several of these families (legacy mode repeats every value), the first family of
the list above that has any row is used alone, so one allocation is never counted twice.

No Django import, like ``billing.dcgm``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import NamedTuple

from billing.dcgm import LabelError, parse_labels

#: Per-container allocation families, best first, and their (namespace, pod, container, device) labels.
ALLOCATION_FAMILIES: dict[str, tuple[str, str, str, str]] = {
    "hami_vgpu_memory_allocated_bytes": ("namespace", "pod", "container_index", "device_uuid"),
    "vGPUMemoryAllocated": ("podnamespace", "podname", "containeridx", "deviceuuid"),
    "vGPUPodsDeviceAllocated": ("podnamespace", "podname", "containeridx", "deviceuuid"),
}
#: Per-device memory families, best first, and their device label.
LIMIT_FAMILIES: dict[str, str] = {
    "hami_gpu_memory_limit_bytes": "device_uuid",
    "GPUDeviceMemoryLimit": "deviceuuid",
}


class PodAllocation(NamedTuple):
    """The GPU memory HAMi allocated to one pod on one device (all its containers), in bytes."""

    namespace: str
    pod: str
    memory_bytes: float


@dataclass(slots=True)
class Allocations:
    """One scheduler exposition, read: pods per device UUID, each device's memory, skipped lines."""

    pods: dict[str, list[PodAllocation]] = field(default_factory=dict)
    memory_bytes: dict[str, float] = field(default_factory=dict)
    family: str = ""
    bad_lines: list[tuple[int, str]] = field(default_factory=list)


def parse(text: str | bytes) -> Allocations:
    """Read a HAMi scheduler ``/metrics`` body; garbled lines of the wanted families are skipped, listed."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    # (family) -> {(uuid, namespace, pod, container): bytes}; (family) -> {uuid: bytes}
    rows: dict[str, dict[tuple[str, str, str, str], float]] = {}
    limits: dict[str, dict[str, float]] = {}
    out = Allocations()
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line or line[0] == "#":
            continue
        name, _, rest = line.partition("{")
        name = name.strip()
        if name not in ALLOCATION_FAMILIES and name not in LIMIT_FAMILIES:
            continue
        labels_text, brace, value_text = rest.rpartition("}")
        if not brace:
            out.bad_lines.append((lineno, f"{name}: no label set"))
            continue
        try:
            labels = parse_labels(labels_text)
            value = float(value_text.split()[0])
        except (LabelError, ValueError, IndexError):
            out.bad_lines.append((lineno, f"{name}: garbled line"))
            continue
        if not math.isfinite(value) or value < 0:
            out.bad_lines.append((lineno, f"{name}: value {value_text.strip()} is not a size"))
            continue
        if name in LIMIT_FAMILIES:
            uuid = labels.get(LIMIT_FAMILIES[name], "")
            if uuid:
                limits.setdefault(name, {})[uuid] = value
            continue
        ns_label, pod_label, container_label, uuid_label = ALLOCATION_FAMILIES[name]
        key = (labels.get(uuid_label, ""), labels.get(ns_label, ""), labels.get(pod_label, ""), "")
        if not all(key[:3]):
            out.bad_lines.append((lineno, f"{name}: lacks {uuid_label}, {ns_label} or {pod_label}"))
            continue
        key = (*key[:3], labels.get(container_label, ""))
        rows.setdefault(name, {})[key] = value
    family = next((f for f in ALLOCATION_FAMILIES if f in rows), "")
    out.family = family
    per_pod: dict[str, dict[tuple[str, str], float]] = {}
    for (uuid, namespace, pod, _container), value in rows.get(family, {}).items():
        pods = per_pod.setdefault(uuid, {})
        pods[(namespace, pod)] = pods.get((namespace, pod), 0.0) + value
    out.pods = {
        uuid: [PodAllocation(ns, pod, value) for (ns, pod), value in pods.items() if value > 0]
        for uuid, pods in per_pod.items()
    }
    limit_family = next((f for f in LIMIT_FAMILIES if f in limits), None)
    out.memory_bytes = limits.get(limit_family, {}) if limit_family else {}
    return out
