"""Writes to the catalog and the fleet."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from django.db import transaction

from core import audit
from core.audit import Actor
from core.declared import refuse_undone_edit
from fleet import catalog
from fleet.fleet_file import Fleet
from fleet.models import Gpu, GpuClass, GpuModel, HostCluster, Node
from gpucloud.errors import PermissionDenied, ValidationFailed


def _upsert(manager: Any, key: str, value: str, fields: dict[str, Any], existing: dict[str, Any]) -> Any:
    """Create or update one row, writing only when a field differs."""
    row = existing.get(value)
    if row is None:
        return manager.create(**{key: value}, **fields)
    if any(getattr(row, name) != wanted for name, wanted in fields.items()):
        for name, wanted in fields.items():
            setattr(row, name, wanted)
        row.save()
    return row


def sync_catalog(gpu_model: Any = GpuModel, gpu_class: Any = GpuClass) -> None:
    """Make the GpuModel and GpuClass tables match `fleet.catalog` (used by a data migration too)."""
    models = {m.slug: m for m in gpu_model.objects.all()}
    classes = {c.name: c for c in gpu_class.objects.all()}
    for spec in catalog.GPU_MODELS:
        model_fields = {
            "display_name": spec.display_name,
            "memory_gb": spec.memory_gb,
            "product_label": spec.product_label,
            "dcgm_model_names": list(spec.dcgm_model_names),
            "mig_profiles": [asdict(p) for p in spec.mig_profiles],
        }
        model = _upsert(gpu_model.objects, "slug", spec.slug, model_fields, models)
        for class_spec in catalog.classes_of(spec):
            class_fields = {
                "kind": class_spec.kind,
                "gpu_model_id": model.pk,
                "mig_profile": class_spec.mig_profile,
                "resource_name": class_spec.resource_name,
            }
            _upsert(gpu_class.objects, "name", class_spec.name, class_fields, classes)


@dataclass(frozen=True)
class FleetLoad:
    host_cluster: HostCluster
    nodes: int
    gpus: int
    removed_nodes: int


def _sync_gpus(fleet: Fleet, nodes: dict[str, Node], models: dict[str, GpuModel]) -> int:
    """Bring the GPUs of the fleet's nodes in line with the file: bulk writes, a fleet of 10,000 is fast."""
    wanted = {
        gpu.uuid: Gpu(
            node=nodes[entry.name],
            uuid=gpu.uuid,
            index=gpu.index,
            gpu_model=models[gpu.model],
            numa_node=gpu.numa_node,
        )
        for entry in fleet.nodes
        for gpu in entry.gpus
    }
    node_ids = [node.pk for node in nodes.values()]
    Gpu.objects.filter(node_id__in=node_ids).exclude(uuid__in=wanted).delete()
    existing = {gpu.uuid: gpu for gpu in Gpu.objects.filter(uuid__in=wanted)}
    fields = ["node_id", "index", "gpu_model_id", "numa_node"]
    changed = []
    for uuid, gpu in wanted.items():
        current = existing.get(uuid)
        if current is not None and any(getattr(current, f) != getattr(gpu, f) for f in fields):
            gpu.pk = current.pk
            changed.append(gpu)
    Gpu.objects.bulk_update(changed, ["node", "index", "gpu_model", "numa_node"], batch_size=1000)
    Gpu.objects.bulk_create([g for u, g in wanted.items() if u not in existing], batch_size=1000)
    return len(wanted)


@transaction.atomic
def load_fleet(*, actor: Actor, fleet: Fleet, source: str) -> FleetLoad:
    """Create or update a simulated host cluster from a parsed fleet file; nodes not in it are removed."""
    existing = HostCluster.objects.filter(name=fleet.name).first()
    if existing and existing.driver != HostCluster.Driver.SIMULATED:
        raise ValueError(f"host cluster {fleet.name!r} exists and is not simulated; rename the fleet")
    before = _fleet_snapshot(existing) if existing else None
    host_cluster, _ = HostCluster.objects.update_or_create(
        name=fleet.name,
        defaults={"region": fleet.region, "driver": HostCluster.Driver.SIMULATED, "source": source},
    )
    keep = {node.name for node in fleet.nodes}
    removed, _ = Node.objects.filter(host_cluster=host_cluster).exclude(name__in=keep).delete()
    nodes = {n.name: n for n in Node.objects.filter(host_cluster=host_cluster)}
    for entry in fleet.nodes:
        node_fields = {
            "host_cluster_id": host_cluster.pk,
            "zone": entry.zone,
            "block": entry.block,
            "rack": entry.rack,
            "nvlink_domain": entry.nvlink_domain,
            "cpu_milli": entry.cpu_milli,
            "memory_mib": entry.memory_mib,
        }
        nodes[entry.name] = _upsert(Node.objects, "name", entry.name, node_fields, nodes)
    gpus = _sync_gpus(fleet, nodes, {m.slug: m for m in GpuModel.objects.all()})
    result = FleetLoad(host_cluster, len(fleet.nodes), gpus, removed)
    audit.record(
        actor,
        "fleet.load",
        object_type="host_cluster",
        object_id=host_cluster.public_id,
        before=before,
        after=_fleet_snapshot(host_cluster),
    )
    return result


def _fleet_snapshot(host_cluster: HostCluster) -> dict[str, Any]:
    """A simulated host cluster as `fleet.load` audits it, the same fields before and after a reload."""
    return {
        "name": host_cluster.name,
        "source": host_cluster.source,
        "region": host_cluster.region,
        "nodes": Node.objects.filter(host_cluster=host_cluster).count(),
        "gpus": Gpu.objects.filter(node__host_cluster=host_cluster).count(),
    }


def host_cluster_snapshot(host_cluster: HostCluster) -> dict[str, Any]:
    return {
        "region": host_cluster.region,
        "endpoint_base": host_cluster.endpoint_base,
        "topology_levels": list(host_cluster.topology_levels),
    }


@transaction.atomic
def update_host_cluster(
    *,
    actor: Actor,
    host_cluster: HostCluster,
    region: str | None = None,
    endpoint_base: str | None = None,
    topology_levels: list[str] | None = None,
) -> HostCluster:
    """Change what a host cluster is called where (region), where tenant API servers are served, and which
    node labels describe its topology. Its driver, scheduler and credentials are chosen at registration."""
    if not actor.is_platform_admin:
        raise PermissionDenied("changing a host cluster needs a platform administrator")
    host_cluster = HostCluster.objects.select_for_update().get(pk=host_cluster.pk)
    before = host_cluster_snapshot(host_cluster)
    for field, value in (("region", region), ("endpoint_base", endpoint_base)):
        if value is None:
            continue
        limit = HostCluster._meta.get_field(field).max_length or 0  # type: ignore[union-attr]
        if len(value) > limit:
            raise ValidationFailed.on(field, f"{field} has {len(value)} characters; at most {limit}")
        setattr(host_cluster, field, value)
    if topology_levels is not None:
        host_cluster.topology_levels = list(topology_levels)
    after = host_cluster_snapshot(host_cluster)
    if after == before:
        return host_cluster
    fields = {"region": "region", "endpoint_base": "endpointBase", "topology_levels": "topologyLevels"}
    refuse_undone_edit(
        actor,
        "HostCluster",
        host_cluster.name,
        [name for key, name in fields.items() if before.get(key) != after.get(key)],
        f"changing host cluster {host_cluster.name}",
    )
    host_cluster.save(update_fields=["region", "endpoint_base", "topology_levels"])
    audit.record(
        actor,
        "host_cluster.update",
        object_type="host_cluster",
        object_id=host_cluster.public_id,
        before=before,
        after=host_cluster_snapshot(host_cluster),
    )
    return host_cluster
