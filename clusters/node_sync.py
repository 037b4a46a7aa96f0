"""The node sync: a Kubernetes host cluster's GPU nodes in the fleet follow the cluster, every pass.

Registration imports the GPU nodes once; then every reconcile pass (`clusters.partitions.gpu_pass.
check_conformance`, from the discovery it already makes) calls `sync_nodes` with the GPU nodes it listed:

- a node that joined (listed, not in the fleet) is imported with its GPUs (`node.join`, audited);
- a node no longer listed is marked `gone` with `gone_at` (`node.gone`): its row, GPUs, health history and
  everything billed on it stay; `fleet.selectors.IN_SERVICE` takes it out of capacity and admission, and the
  placement model, the fleet map and the counts leave it out;
- a gone node listed again comes back in the state it left in (`node.return`);
- a node still listed gets its labels, allocatable CPU and memory and topology (zone, block, rack, NVLink
  domain) as listed, and its GPUs follow the count and product labels (`node.update` when the GPUs change:
  that changes capacity).

"Listed" means carrying GPU feature discovery's product label (`discovery.GPU_PRODUCT`): a node that loses it
leaves the GPU fleet like a deleted one. A node of a product the catalog does not know is not imported. An
unchanged cluster costs no writes. Joins, removals, returns and GPU changes are audited as the system actor
`system:node-sync`; labels and allocatable are observations, written without an audit row (the partition
pass relabels nodes itself on every MIG change).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.utils import timezone

from clusters.drivers.discovery import GpuNode
from core import audit
from core.audit import Actor
from fleet import catalog
from fleet.models import Gpu, GpuModel, HostCluster, Node, placeholder_uuid

log = logging.getLogger(__name__)
NODE_SYNC = Actor.system("node-sync")
OBSERVED = ("labels", "cpu_milli", "memory_mib", "zone", "block", "rack", "nvlink_domain")


@dataclass
class NodeSync:
    """What one sync did, by node name."""

    joined: list[str] = field(default_factory=list)
    gone: list[str] = field(default_factory=list)
    returned: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # products the catalog does not know

    @property
    def changed(self) -> bool:
        return bool(self.joined or self.gone or self.returned or self.updated)


def model_for_product(product: str, models: dict[str, GpuModel]) -> GpuModel | None:
    """The catalog model of a `nvidia.com/gpu.product` value (NVIDIA-H200, NVIDIA-H100-80GB-HBM3 …)."""
    wanted = product.lower().replace(" ", "-")
    for spec in catalog.GPU_MODELS:
        if wanted == spec.product_label.lower() or wanted.startswith(spec.product_label.lower() + "-"):
            return models.get(spec.slug)
    return None


def topology(labels: dict[str, str]) -> dict[str, Any]:
    """Zone, block, rack and NVLink domain from the node's labels."""

    def find(*needles: str) -> str:
        return next((v for k, v in labels.items() if any(n in k for n in needles)), "")

    return {
        "zone": labels.get("topology.kubernetes.io/zone", ""),
        "block": find("topology-block", "/block"),
        "rack": find("topology-rack", "/rack"),
        "nvlink_domain": labels.get("nvidia.com/gpu.clique", ""),
    }


def observed(gpu_node: GpuNode) -> dict[str, Any]:
    """The node's fields as the cluster lists them: labels, allocatable CPU and memory, topology."""
    return {
        "labels": dict(gpu_node.labels),
        "cpu_milli": gpu_node.allocatable_cpu_milli,
        "memory_mib": gpu_node.allocatable_memory_mib,
        **topology(gpu_node.labels),
    }


def _audit(action: str, host_cluster: HostCluster, name: str, **details: Any) -> None:
    audit.record(
        NODE_SYNC,
        action,
        object_type="node",
        object_id=f"{host_cluster.name}/{name}",
        after={"host_cluster": host_cluster.name, "node": name, **details},
    )


def _import(host_cluster: HostCluster, gpu_node: GpuNode, model: GpuModel) -> Node:
    node = Node.objects.create(host_cluster=host_cluster, name=gpu_node.name, **observed(gpu_node))
    _add_gpus(node, model, range(gpu_node.count))
    return node


def _add_gpus(node: Node, model: GpuModel, indexes: Iterable[int]) -> None:
    """New GPU rows at these indexes, each with a placeholder UUID until DCGM reports the real one."""
    Gpu.objects.bulk_create(
        Gpu(node=node, index=i, gpu_model=model, uuid=placeholder_uuid(node.host_cluster_id, node.name, i))
        for i in indexes
    )


def _sync_gpus(node: Node, gpu_node: GpuNode, model: GpuModel) -> dict[str, Any]:
    """Make the node's GPUs the count and model listed; returns what changed (empty: nothing).

    A GPU beyond the count listed is removed (with its quarantines); a new index gets a placeholder UUID
    until DCGM reports the real one. Usage billed on a removed GPU stays in the ledger (it names the device).
    """
    gpus = list(node.gpus.all())
    before = {"gpus": len(gpus), "model": sorted({g.gpu_model.slug for g in gpus})}
    surplus = [g.pk for g in gpus if g.index >= gpu_node.count]
    if surplus:
        Gpu.objects.filter(pk__in=surplus).delete()
    have = {g.index for g in gpus}
    missing = [i for i in range(gpu_node.count) if i not in have]
    _add_gpus(node, model, missing)
    swapped = any(g.gpu_model_id != model.pk for g in gpus if g.index < gpu_node.count)
    if swapped:
        node.gpus.exclude(gpu_model=model).update(gpu_model=model)
    after = {"gpus": gpu_node.count, "model": [model.slug] if gpu_node.count else []}
    if not surplus and not missing and not swapped:
        return {}
    return {"before": before, "after": after}


def _update(host_cluster: HostCluster, node: Node, gpu_node: GpuNode, model: GpuModel, out: NodeSync) -> None:
    values = observed(gpu_node)
    back = node.state == Node.State.GONE
    changed = [name for name in OBSERVED if getattr(node, name) != values[name]]
    if back:
        node.mark_back()
        out.returned.append(node.name)
        _audit("node.return", host_cluster, node.name, state=node.state)
    if changed or back:
        for name in changed:
            setattr(node, name, values[name])
        node.save(update_fields=[*changed, "state", "gone_at", "state_before_gone"])
    gpus = _sync_gpus(node, gpu_node, model)
    if gpus:
        _audit("node.update", host_cluster, node.name, **gpus)
    if (changed or gpus) and not back:
        out.updated.append(node.name)


@transaction.atomic
def sync_nodes(
    host_cluster: HostCluster, gpu_nodes: tuple[GpuNode, ...], *, audit_joins: bool = True
) -> NodeSync:
    """Bring the host cluster's nodes in the fleet in line with the GPU nodes the cluster lists (see the
    module docstring). Writes nothing when nothing changed. Registration imports without a `node.join` row
    per node (`audit_joins`): its own `host_cluster.register` row counts them."""
    models = {m.slug: m for m in GpuModel.objects.all()}
    nodes = {
        n.name: n for n in Node.objects.filter(host_cluster=host_cluster).prefetch_related("gpus__gpu_model")
    }
    out = NodeSync()
    listed = set()
    for gpu_node in gpu_nodes:
        model = model_for_product(gpu_node.product, models)
        if model is None:
            out.skipped.append(gpu_node.product or "(no product label)")
            continue
        listed.add(gpu_node.name)
        node = nodes.get(gpu_node.name)
        if node is None:
            _import(host_cluster, gpu_node, model)
            out.joined.append(gpu_node.name)
            if audit_joins:
                _audit("node.join", host_cluster, gpu_node.name, gpus=gpu_node.count, model=model.slug)
        else:
            _update(host_cluster, node, gpu_node, model, out)
    now = timezone.now()
    for name, node in sorted(nodes.items()):
        if name in listed or node.state == Node.State.GONE:
            continue
        node.mark_gone(now)
        node.save(update_fields=["state", "gone_at", "state_before_gone"])
        out.gone.append(name)
        _audit("node.gone", host_cluster, name, gone_at=now.isoformat(), was=node.state_before_gone)
    out.skipped = sorted(set(out.skipped))
    if out.changed:
        log.info(
            "nodes synced",
            extra={"host_cluster": host_cluster.name, "joined": out.joined, "gone": out.gone},
        )
    return out
