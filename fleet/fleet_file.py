"""Reading a fleet file: the YAML description of a simulated host cluster.

Pure Python (no Django), so errors can name the file and line of the offending entry:

    apiVersion: gpucloud.io/v1alpha1
    kind: Fleet
    metadata: {name: demo}
    spec:
      region: local-1
      nodeGroups:
        - name: h200-r1            # nodes h200-r1-0 … h200-r1-3
          count: 4
          gpuModel: h200-141gb     # a catalog model slug
          gpusPerNode: 8
          cpuMilli: 224000
          memoryMiB: 2097152
          numaNodes: 2
          topology: {zone: zone-a, block: block-1, rack: rack-1, nvlinkDomain: nvl-1}
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from fleet.catalog import GPU_MODELS, model_by_slug

NAME_RE = re.compile(r"^[a-z0-9]([a-z0-9.-]{0,61}[a-z0-9])?$")
TOPOLOGY_KEYS = {"zone", "block", "rack", "nvlinkDomain"}


class FleetFileError(Exception):
    """A fleet file that cannot be loaded; the message names the file and line."""


@dataclass(frozen=True)
class GpuEntry:
    uuid: str
    index: int
    model: str
    numa_node: int


@dataclass(frozen=True)
class NodeEntry:
    name: str
    cpu_milli: int
    memory_mib: int
    zone: str
    block: str
    rack: str
    nvlink_domain: str
    gpus: tuple[GpuEntry, ...]


@dataclass
class Fleet:
    name: str
    region: str
    nodes: list[NodeEntry] = field(default_factory=list)


class _Mapping(dict[str, Any]):
    line = 0


class _LineLoader(yaml.SafeLoader):
    """Remembers the line each mapping starts on."""


def _construct_mapping(loader: _LineLoader, node: yaml.MappingNode) -> _Mapping:
    mapping = _Mapping(loader.construct_mapping(node, deep=True))  # type: ignore[arg-type]
    mapping.line = node.start_mark.line + 1
    return mapping


_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def gpu_uuid(cluster: str, node: str, index: int) -> str:
    """A stable, NVML-shaped UUID for a simulated GPU."""
    return f"GPU-{uuid.uuid5(uuid.NAMESPACE_URL, f'gpucloud-sim/{cluster}/{node}/{index}')}"


def load(path: str | Path) -> Fleet:
    path = Path(path)
    try:
        document = yaml.load(path.read_text(), Loader=_LineLoader)
    except OSError as exc:
        raise FleetFileError(f"{path}: cannot be read: {exc.strerror}") from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise FleetFileError(f"{where}: not valid YAML: {getattr(exc, 'problem', exc)}") from exc
    return parse(document, str(path))


def _fail(where: str, mapping: Any, message: str) -> FleetFileError:
    line = getattr(mapping, "line", 0)
    return FleetFileError(f"{where}:{line}: {message}" if line else f"{where}: {message}")


def _get(mapping: Any, key: str, kind: type, where: str, default: Any = None) -> Any:
    if not isinstance(mapping, dict):
        raise _fail(where, mapping, f"expected a mapping holding {key!r}")
    if key not in mapping:
        if default is not None:
            return default
        raise _fail(where, mapping, f"{key!r} is missing")
    value = mapping[key]
    if kind is int and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
        raise _fail(where, mapping, f"{key!r} must be a whole number ≥ 0, not {value!r}")
    if not isinstance(value, kind):
        raise _fail(where, mapping, f"{key!r} must be a {kind.__name__}, not {value!r}")
    return value


def parse(document: Any, where: str = "<fleet>") -> Fleet:
    if not isinstance(document, dict) or document.get("kind") != "Fleet":
        raise _fail(where, document, "not a fleet file: expected 'kind: Fleet'")
    if document.get("apiVersion") != "gpucloud.io/v1alpha1":
        raise _fail(where, document, "apiVersion must be gpucloud.io/v1alpha1")
    name = _get(_get(document, "metadata", dict, where), "name", str, where)
    if not NAME_RE.match(name):
        raise _fail(where, document["metadata"], f"metadata.name {name!r} is not a DNS-safe name")
    spec = _get(document, "spec", dict, where)
    fleet = Fleet(name=name, region=_get(spec, "region", str, where, default=""))
    groups = _get(spec, "nodeGroups", list, where)
    for group in groups:
        fleet.nodes.extend(_nodes(name, group, where))
    names = [node.name for node in fleet.nodes]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise _fail(where, spec, f"node names repeat: {', '.join(duplicates)}")
    return fleet


def _nodes(cluster: str, group: Any, where: str) -> list[NodeEntry]:
    prefix = _get(group, "name", str, where)
    if not NAME_RE.match(prefix):
        raise _fail(where, group, f"node group name {prefix!r} is not a DNS-safe name")
    model = _get(group, "gpuModel", str, where)
    if model_by_slug(model) is None:
        known = ", ".join(m.slug for m in GPU_MODELS)
        raise _fail(where, group, f"gpuModel {model!r} is not in the catalog; known models: {known}")
    count = _get(group, "count", int, where, default=1)
    gpus = _get(group, "gpusPerNode", int, where)
    numa = max(1, _get(group, "numaNodes", int, where, default=1))
    topology = _get(group, "topology", dict, where, default=_Mapping())
    unknown = set(topology) - TOPOLOGY_KEYS
    if unknown:
        raise _fail(
            where, group, f"unknown topology keys {sorted(unknown)}; allowed: {sorted(TOPOLOGY_KEYS)}"
        )
    nodes = []
    for n in range(count):
        node_name = f"{prefix}-{n}"
        nodes.append(
            NodeEntry(
                name=node_name,
                cpu_milli=_get(group, "cpuMilli", int, where),
                memory_mib=_get(group, "memoryMiB", int, where),
                zone=str(topology.get("zone", "")),
                block=str(topology.get("block", "")),
                rack=str(topology.get("rack", "")),
                nvlink_domain=str(topology.get("nvlinkDomain", "")),
                gpus=tuple(
                    GpuEntry(gpu_uuid(cluster, node_name, i), i, model, i * numa // max(gpus, 1))
                    for i in range(gpus)
                ),
            )
        )
    return nodes
