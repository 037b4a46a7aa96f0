"""The GPU Operator's partitioning inputs: the mig-parted config of the MIG manager and the device plugin's
sharing configs (shared/reference/kubernetes-objects.md §5, integration-shapes.md §3).

gpucloud owns two ConfigMaps in the operator's namespace, named by settings and referenced by the
ClusterPolicy (`spec.migManager.config.name`, `spec.devicePlugin.config.name`):

- the MIG config (key `config.yaml`): `version: v1`, `mig-configs` with `all-disabled` and one named config
  per distinct node layout, `gpucloud-<hash of the layout>` (plus `-r<n>` for the n-th retry after a
  failure, so the label changes and the MIG manager runs again), each listing the node's GPU indices with
  their `mig-devices`;
- the device-plugin config: `default` (no sharing, `migStrategy: mixed`) and `gpucloud-time-sliced`
  (`timeSlicing` with `renameByDefault: true`, so the shared replicas are advertised as
  `nvidia.com/gpu.shared`, the resource name of the `<model>.shared` classes).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Mapping
from typing import Any

import yaml

from gpucloud.kube.meta import SHARED, Manifest, obj, owned

DISABLED = "all-disabled"
PREFIX = "gpucloud-"
TIME_SLICED = "gpucloud-time-sliced"
DEFAULT_SHARING = "default"
MIG_CONFIG_KEY = "config.yaml"
Layouts = tuple[tuple[str, ...], ...]


def config_name(layouts: Layouts, attempt: int = 0) -> str:
    """The mig-parted config name of a node layout: `all-disabled`, else `gpucloud-<hash>[-r<attempt>]`."""
    if not any(layouts):
        return DISABLED if not attempt else f"{PREFIX}disabled-r{attempt}"
    text = json.dumps([sorted(layout) for layout in layouts])
    name = PREFIX + hashlib.sha256(text.encode()).hexdigest()[:10]
    return f"{name}-r{attempt}" if attempt else name


def _entries(layouts: Layouts) -> list[dict[str, Any]]:
    """One entry per distinct GPU layout, listing the GPU indices that get it."""
    groups: dict[tuple[str, ...], list[int]] = {}
    for index, layout in enumerate(layouts):
        groups.setdefault(tuple(sorted(layout)), []).append(index)
    entries = []
    for layout, indices in sorted(groups.items(), key=lambda item: item[1][0]):
        entry: dict[str, Any] = {"devices": indices, "mig-enabled": bool(layout)}
        if layout:
            entry["mig-devices"] = dict(sorted(Counter(layout).items()))
        entries.append(entry)
    return entries


def mig_parted_config(configs: Mapping[str, Layouts]) -> str:
    """The mig-parted config file: `all-disabled` and every named node layout."""
    named: dict[str, Any] = {DISABLED: [{"devices": "all", "mig-enabled": False}]}
    for name in sorted(configs):
        if name != DISABLED:
            named[name] = _entries(configs[name])
    return yaml.safe_dump({"version": "v1", "mig-configs": named}, sort_keys=False)


def parse_mig_parted(text: str) -> dict[str, dict[int, tuple[str, ...]]]:
    """Named configs of a mig-parted file as {name: {GPU index: layout}}; `devices: all` is index -1."""
    document = yaml.safe_load(text or "") or {}
    out: dict[str, dict[int, tuple[str, ...]]] = {}
    for name, entries in (document.get("mig-configs") or {}).items():
        gpus: dict[int, tuple[str, ...]] = {}
        for entry in entries or []:
            devices = entry.get("devices")
            layout: tuple[str, ...] = ()
            if entry.get("mig-enabled"):
                counts = entry.get("mig-devices") or {}
                layout = tuple(sorted(Counter({str(k): int(v) for k, v in counts.items()}).elements()))
            for index in [-1] if devices == "all" else list(devices or []):
                gpus[int(index)] = layout
        out[str(name)] = gpus
    return out


def layouts_of(config: Mapping[int, tuple[str, ...]], gpus: int) -> Layouts:
    """A parsed named config spread over a node's GPUs (GPUs it does not name keep MIG disabled)."""
    every = config.get(-1, ())
    return tuple(config.get(index, every) for index in range(gpus))


def render_mig_config(namespace: str, name: str, configs: Mapping[str, Layouts]) -> Manifest:
    data = {MIG_CONFIG_KEY: mig_parted_config(configs)}
    return owned(obj("v1", "ConfigMap", name, namespace, data=data), SHARED)


def device_plugin_configs(replicas: int) -> dict[str, str]:
    """The device plugin's named configs: no sharing by default, and time-slicing into `replicas`."""
    base = {"version": "v1", "flags": {"migStrategy": "mixed"}}
    sliced = {
        **base,
        "sharing": {
            "timeSlicing": {
                "renameByDefault": True,
                "failRequestsGreaterThanOne": True,
                "resources": [{"name": "nvidia.com/gpu", "replicas": replicas}],
            }
        },
    }
    return {
        DEFAULT_SHARING: yaml.safe_dump(base, sort_keys=False),
        TIME_SLICED: yaml.safe_dump(sliced, sort_keys=False),
    }


def render_device_plugin_config(namespace: str, name: str, replicas: int) -> Manifest:
    return owned(obj("v1", "ConfigMap", name, namespace, data=device_plugin_configs(replicas)), SHARED)
