"""The partition pass over a Kubernetes host cluster: MIG layouts and time-slicing from tenants' guarantees.

Once per reconcile pass, before the tenants' objects are rendered (docs/kubernetes.md, "Partitions"):

1. read the GPU nodes (labels, allocatable), which of them run GPU pods, and gpucloud's two GPU Operator
   ConfigMaps (clusters/drivers/gpu_operator.py);
2. the demand: guaranteed units of every MIG class, and GPUs for the `<model>.shared` classes of trusted
   tenants, on this host cluster;
3. plan (placement/engine/partition_plans.py): a layout per GPU, the time-sliced nodes, the changes allowed
   now;
4. write the ConfigMaps when their content changes, then label the nodes to change;
5. store per node what it advertises (MIG slices only after the MIG manager's `success`; nothing of a GPU out
   of service), failures with a backoff, and what waits and why; on the host cluster, a summary
   (`HostCluster.partitions`).

A GPU out of service (quarantined, or every GPU of a node that is not ready: `fleet.selectors.IN_SERVICE`) is
left out of the plan: no slices or time-slicing capacity are planned on it, and what it would advertise is
subtracted from the node's advertised units. Health is read every pass, so a release is planned on at the
next pass (docs/health.md, "Partitions").

An unchanged cluster costs two lists (unfinished pods, GPU nodes) and two ConfigMap reads, and no writes, in
the cluster or in the database. The tenants' quotas then count only what is advertised (`ready_units`).
"""

from __future__ import annotations

import logging
import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from clusters.drivers import conformance, discovery
from clusters.drivers.gpu_operator import (
    MIG_CONFIG,
    MIG_STATE,
    PLUGIN_CONFIG,
    GpuOperatorClient,
    ObservedNode,
    OperatorView,
    advertised,
)
from clusters.node_sync import sync_nodes
from clusters.render.gpu_operator import (
    DISABLED,
    PREFIX,
    TIME_SLICED,
    Layouts,
    config_name,
    layouts_of,
    render_device_plugin_config,
    render_mig_config,
)
from fleet.models import GpuClass, HostCluster, Node, NodePartition
from fleet.selectors import gpus_out_of_service
from gpucloud.kube.api import KubeApi
from gpucloud.kube.errors import DriverError
from placement.engine.errors import EngineError
from placement.engine.partition_plans import NodeTarget, PartitionNode, PartitionPlan, plan_partitions
from tenants.capacity import advertised_units, guaranteed_by_class
from tenants.models import Quota, Tenant

log = logging.getLogger(__name__)
PARTITIONED = (GpuClass.Kind.MIG, GpuClass.Kind.SHARED)


@dataclass
class PartitionOutcome:
    """What a partition pass did."""

    plan: PartitionPlan
    relabelled: list[str] = field(default_factory=list)
    cordoned: list[str] = field(default_factory=list)
    uncordoned: list[str] = field(default_factory=list)
    configmaps_written: int = 0
    db_writes: int = 0


def demand(host_cluster: HostCluster) -> tuple[dict[str, int], dict[str, int]]:
    """Guaranteed units per MIG class, and GPUs per model the shared classes of trusted tenants need."""
    classes = {c.name: c for c in GpuClass.objects.select_related("gpu_model")}
    mig: dict[str, int] = {}
    for (_, name), units in guaranteed_by_class(host_cluster).items():
        if classes[name].kind == GpuClass.Kind.MIG:
            mig[name] = units
    shared_units: dict[str, int] = defaultdict(int)
    trusted = Quota.objects.filter(
        tenant__cluster__host_cluster=host_cluster,
        tenant__trust_tier=Tenant.TrustTier.TRUSTED,
        gpu_class__kind=GpuClass.Kind.SHARED,
    ).exclude(tenant__state=Tenant.State.DELETED)
    for quota in trusted.select_related("gpu_class__gpu_model"):
        shared_units[quota.gpu_class.gpu_model.slug] += quota.guaranteed
    replicas = int(settings.SHARED_GPU_REPLICAS)
    return mig, {model: math.ceil(units / replicas) for model, units in shared_units.items() if units}


def backoff(failures: int) -> timedelta:
    seconds = settings.MIG_RETRY_SECONDS * 2 ** max(0, failures - 1)
    return timedelta(seconds=min(seconds, settings.MIG_RETRY_MAX_SECONDS))


def _current_layouts(obs: ObservedNode, view: OperatorView) -> tuple[Layouts, str]:
    """The layout the node's label names, and a reason to hold it when that cannot be known."""
    label = obs.mig_config
    if label.startswith(PREFIX):
        config = view.mig_configs.get(label)
        if config is None:
            return tuple(() for _ in range(obs.gpus)), f"its MIG config {label} is not in the ConfigMap"
        return layouts_of(config, obs.gpus), ""
    return tuple(() for _ in range(obs.gpus)), ""


def _failure(obs: ObservedNode, row: NodePartition | None, now: datetime) -> tuple[int, datetime | None]:
    """Failures in a row and when to retry, counting a failure once (when it is first seen)."""
    failures = row.failures if row else 0
    retry_at = row.retry_at if row else None
    if obs.mig_state == NodePartition.MigState.FAILED and obs.managed:
        if row is None or row.mig_state != NodePartition.MigState.FAILED or row.mig_config != obs.mig_config:
            failures += 1
            retry_at = now + backoff(failures)
    elif obs.mig_state == NodePartition.MigState.SUCCESS:
        failures, retry_at = 0, None
    return failures, retry_at


def _unavailable(obs: ObservedNode, node: Node, out_of_service: dict[str, frozenset[int]]) -> frozenset[int]:
    if node.state != Node.State.READY:
        return frozenset(range(obs.gpus))
    return frozenset(i for i in out_of_service.get(obs.name, frozenset()) if i < obs.gpus)


def offered(
    obs: ObservedNode, count_mig: bool, layouts: Layouts, unavailable: frozenset[int]
) -> dict[str, int]:
    """What the node advertises (`advertised`) less what its GPUs out of service carry: their MIG slices (as
    the layout its label names has them), a whole GPU, or a time-sliced GPU's replicas. The device plugin may
    well still list a quarantined GPU; gpucloud does not count it."""
    offer = advertised(obs, count_mig)
    if not unavailable or not obs.model:
        return offer
    less: Counter[str] = Counter()
    replicas = offer.get(f"{obs.model}.shared", 0) // obs.gpus if obs.gpus else 0
    for index in unavailable:
        layout = layouts[index] if index < len(layouts) else ()
        if layout:
            if count_mig:
                less.update(f"{obs.model}.mig-{profile}" for profile in layout)
        elif replicas:
            less[f"{obs.model}.shared"] += replicas
        else:
            less[obs.model] += 1
    left = {name: units - less[name] for name, units in offer.items()}
    return {name: units for name, units in left.items() if units > 0}


def _partition_node(
    obs: ObservedNode,
    node: Node,
    row: NodePartition | None,
    view: OperatorView,
    now: datetime,
    unavailable: frozenset[int] = frozenset(),
) -> tuple[PartitionNode, int, datetime | None]:
    layouts, hold = _current_layouts(obs, view)
    failures, retry_at = _failure(obs, row, now)
    failed = obs.mig_state == NodePartition.MigState.FAILED and obs.managed
    if failed and retry_at is not None and retry_at > now:
        hold = (
            hold
            or f"its MIG config {obs.mig_config} failed ({failures}×); retrying at {retry_at:%H:%M:%S} UTC"
        )
    if node.state != Node.State.READY:
        hold = hold or f"the node is {node.state}"
    return (
        PartitionNode(
            name=obs.name,
            model=obs.model,
            gpus=obs.gpus,
            mig_capable=obs.mig_capable,
            layouts=layouts,
            busy=obs.busy,
            managed=obs.managed and bool(obs.model),
            sharing=obs.sharing,
            in_flight=obs.in_flight,
            held=hold,
            retry=failed and not hold,
            foreign_slices=(offered(obs, not obs.in_flight, layouts, unavailable) if not obs.managed else {}),
            pods=obs.pods,
            cordoned=obs.cordoned_for_mig,
            unavailable=unavailable,
        ),
        failures,
        retry_at,
    )


def _labels(node: PartitionNode, target: NodeTarget, failures: int) -> dict[str, str | None]:
    labels: dict[str, str | None] = {}
    if target.layouts != node.layouts or node.retry:
        labels[MIG_CONFIG] = config_name(target.layouts, failures if node.retry else 0)
        labels[MIG_STATE] = NodePartition.MigState.PENDING
    if target.sharing != node.sharing:
        labels[PLUGIN_CONFIG] = TIME_SLICED if target.sharing else None
    return labels


def reconcile_partitions(host_cluster: HostCluster, api: KubeApi) -> PartitionOutcome:
    """One partition pass (see the module docstring). Raises DriverError when the cluster cannot be read."""
    client = GpuOperatorClient(api, settings.GPU_OPERATOR_NAMESPACE)
    view = client.observe((settings.MIG_CONFIGMAP, settings.DEVICE_PLUGIN_CONFIGMAP))
    nodes = {n.name: n for n in Node.objects.filter(host_cluster=host_cluster).select_related("partition")}
    now = timezone.now()
    observed = [obs for obs in view.nodes if obs.name in nodes]
    planned: dict[str, tuple[PartitionNode, int, datetime | None]] = {}
    out_of_service = gpus_out_of_service(
        host_cluster
    )  # a node not ready has all its GPUs out: `_unavailable`
    for obs in observed:
        node = nodes[obs.name]
        unavailable = _unavailable(obs, node, out_of_service)
        planned[obs.name] = _partition_node(
            obs, node, getattr(node, "partition", None), view, now, unavailable
        )
    mig, shared = demand(host_cluster)
    plan = plan_partitions(
        [p for p, _, _ in planned.values()], mig, shared, max_changes=settings.MIG_MAX_NODES
    )
    outcome = PartitionOutcome(plan)
    labels = {
        name: _labels(planned[name][0], plan.targets[name], planned[name][1]) for name in plan.apply_now
    }
    outcome.configmaps_written = _write_configmaps(client, view, plan, labels)
    for name, wanted in labels.items():
        client.label(name, wanted)
        outcome.relabelled.append(name)
    for obs in observed:
        # Cordoned while it must drain for MIG, and until the change it drained for has finished.
        keep = obs.cordoned_for_mig and (obs.in_flight or MIG_CONFIG in labels.get(obs.name, {}))
        want = obs.name in plan.drain or keep
        if want != obs.cordoned_for_mig:
            client.cordon_for_mig(obs, want)
            (outcome.cordoned if want else outcome.uncordoned).append(obs.name)
    outcome.db_writes = _write_back(host_cluster, nodes, observed, planned, plan, labels)
    return outcome


def _write_configmaps(
    client: GpuOperatorClient,
    view: OperatorView,
    plan: PartitionPlan,
    labels: dict[str, dict[str, str | None]],
) -> int:
    """The MIG config holds every layout a node carries or is about to: the MIG manager of a node whose
    label names a config missing from the file fails."""
    configs: dict[str, Layouts] = {}
    by_name = {obs.name: obs for obs in view.nodes}
    for obs in view.nodes:
        if obs.mig_config.startswith(PREFIX) and obs.mig_config in view.mig_configs:
            configs[obs.mig_config] = layouts_of(view.mig_configs[obs.mig_config], obs.gpus)
    for name, wanted in labels.items():
        chosen = wanted.get(MIG_CONFIG)
        if chosen and chosen != DISABLED:
            configs[chosen] = plan.targets[name].layouts
    uses_sharing = any(t.sharing for t in plan.targets.values()) or any(o.sharing for o in by_name.values())
    written = 0
    mig_name, plugin_name = settings.MIG_CONFIGMAP, settings.DEVICE_PLUGIN_CONFIGMAP
    if configs or view.live.get(mig_name) is not None:
        manifest = render_mig_config(client.namespace, mig_name, configs)
        written += client.apply(manifest, view.live.get(mig_name))
    if uses_sharing or view.live.get(plugin_name) is not None:
        manifest = render_device_plugin_config(client.namespace, plugin_name, settings.SHARED_GPU_REPLICAS)
        written += client.apply(manifest, view.live.get(plugin_name))
    return written


def _row_values(
    obs: ObservedNode,
    planned: tuple[PartitionNode, int, datetime | None],
    plan: PartitionPlan,
    labels: dict[str, str | None] | None,
) -> dict[str, Any]:
    pnode, failures, retry_at = planned
    target = plan.targets.get(obs.name)
    layouts = target.layouts if target is not None else pnode.layouts
    count_mig = not obs.in_flight and not (obs.managed and obs.mig_state == NodePartition.MigState.FAILED)
    if obs.mig_config.startswith(PREFIX) and obs.mig_state != NodePartition.MigState.SUCCESS:
        count_mig = False
    values: dict[str, Any] = {
        "mig_config": obs.mig_config,
        "mig_state": obs.mig_state if obs.mig_state in NodePartition.MigState.values else "",
        "layouts": [list(layout) for layout in layouts],
        "sharing": target.sharing if target is not None else obs.sharing,
        "advertised": offered(obs, count_mig, pnode.layouts, pnode.unavailable),
        "busy": obs.busy,
        "waiting": plan.waiting.get(obs.name, ""),
        "failures": failures,
        "retry_at": retry_at,
    }
    if labels:  # what was just asked for: the node advertises none of the new layout's slices yet
        values["mig_config"] = labels.get(MIG_CONFIG) or values["mig_config"]
        if MIG_CONFIG in labels:
            values["mig_state"] = NodePartition.MigState.PENDING
            values["advertised"] = offered(obs, False, pnode.layouts, pnode.unavailable)
    return values


def _write_back(
    host_cluster: HostCluster,
    nodes: dict[str, Node],
    observed: list[ObservedNode],
    planned: dict[str, tuple[PartitionNode, int, datetime | None]],
    plan: PartitionPlan,
    labels: dict[str, dict[str, str | None]],
) -> int:
    """Store each node's partition state and the host cluster's summary, writing only what changed."""
    writes = 0
    with transaction.atomic():
        for obs in observed:
            values = _row_values(obs, planned[obs.name], plan, labels.get(obs.name))
            row = getattr(nodes[obs.name], "partition", None)
            if row is None:
                NodePartition.objects.create(node=nodes[obs.name], **values)
                writes += 1
            elif any(getattr(row, key) != value for key, value in values.items()):
                NodePartition.objects.filter(pk=row.pk).update(**values, updated_at=timezone.now())
                writes += 1
        summary = {
            "waiting": dict(sorted(plan.waiting.items())),
            "failed": sorted(o.name for o in observed if o.managed and o.mig_state == "failed"),
            "busy": sorted(o.name for o in observed if o.busy),
            "cordoned": sorted(plan.drain),
            "unsatisfied": dict(sorted(plan.unsatisfied.items())),
            "shared_short": dict(sorted(plan.shared_short.items())),
        }
        if host_cluster.partitions != summary:
            host_cluster.partitions = summary
            host_cluster.save(update_fields=["partitions"])
            writes += 1
    return writes


def ready_units(host_cluster: HostCluster) -> dict[tuple[int, str], int]:
    """Units of each MIG and shared class each tenant's guarantee may count on now: what the nodes advertise,
    given to the tenants' guarantees oldest quota first. Keyed by (tenant id, class name)."""
    offered = defaultdict(int, advertised_units(host_cluster).get(host_cluster.name, {}))
    quotas = (
        Quota.objects.filter(tenant__cluster__host_cluster=host_cluster, gpu_class__kind__in=PARTITIONED)
        .exclude(tenant__state=Tenant.State.DELETED)
        .order_by("pk")
        .values_list("tenant_id", "gpu_class__name", "guaranteed")
    )
    ready = {}
    for tenant_id, name, guaranteed in quotas:
        ready[(tenant_id, name)] = min(guaranteed, offered[name])
        offered[name] -= ready[(tenant_id, name)]
    return ready


CHECKED_EVERY = timedelta(minutes=5)  # checked_at is rewritten at most this often when nothing changed


def check_conformance(host_cluster: HostCluster, api: KubeApi) -> None:
    """Re-check what the cluster runs (every pass): the conformance report, the add-on flags and the GPU
    resource names tenants' ResourceQuotas name, written only when they change (and `checked_at` at most
    every few minutes), and the fleet's nodes from the GPU nodes listed (`clusters.node_sync`). Fails soft,
    like the partition pass."""
    try:
        found = discovery.discover(api, conformance=True)
    except DriverError as exc:
        log.warning("conformance check failed", extra={"host_cluster": host_cluster.name, "error": str(exc)})
        return
    if found.nodes_listed:  # the same list brings the fleet's nodes in line: joined, gone, relabelled
        sync_nodes(host_cluster, found.gpu_nodes)
    several = tenants_with_several_models(host_cluster)
    report = [
        c.as_dict()
        for c in conformance.check(
            found,
            mig_configmap=settings.MIG_CONFIGMAP,
            plugin_configmap=settings.DEVICE_PLUGIN_CONFIGMAP,
            scheduler=host_cluster.scheduler,
            several_models=several,
        )
    ]
    per_model = next(c for c in report if c["name"] == "per_model_quotas")
    if several and not per_model["found"]:
        log.warning(
            "per-model GPU quotas do not hold",
            extra={"host_cluster": host_cluster.name, "tenants": several, "without": per_model["without"]},
        )
    addons = {**host_cluster.addons, **found.addons}
    now = timezone.now()
    changed = [
        name
        for name, value in (
            ("conformance", report),
            ("addons", addons),
            ("gpu_resources", list(found.gpu_resources())),
            ("server_version", found.server_version or host_cluster.server_version),
            # Kept when this read failed: the egress policies go on denying the last addresses seen.
            ("api_server_cidrs", list(found.api_server_cidrs) or host_cluster.api_server_cidrs),
        )
        if getattr(host_cluster, name) != value
    ]
    stale = host_cluster.checked_at is None or now - host_cluster.checked_at > CHECKED_EVERY
    if not changed and not stale:
        return
    host_cluster.conformance, host_cluster.addons, host_cluster.checked_at = report, addons, now
    host_cluster.gpu_resources = list(found.gpu_resources())
    host_cluster.server_version = found.server_version or host_cluster.server_version
    host_cluster.api_server_cidrs = list(found.api_server_cidrs) or host_cluster.api_server_cidrs
    host_cluster.save(update_fields=[*changed, "checked_at"])


def tenants_with_several_models(host_cluster: HostCluster) -> list[str]:
    """Tenants of the host cluster holding whole-GPU quotas of more than one model: their pods ask for
    `nvidia.com/gpu` whatever the model (clusters/render/resourcequota.py, "per model")."""
    models: dict[str, set[str]] = defaultdict(set)
    quotas = Quota.objects.filter(
        tenant__cluster__host_cluster=host_cluster, gpu_class__kind=GpuClass.Kind.WHOLE
    )
    for slug, model in quotas.exclude(tenant__state=Tenant.State.DELETED).values_list(
        "tenant__slug", "gpu_class__gpu_model__slug"
    ):
        models[slug].add(model)
    return sorted(slug for slug, held in models.items() if len(held) > 1)


def manages_partitions(host_cluster: HostCluster) -> bool:
    """Partitions are gpucloud's on Kubernetes host clusters that run the GPU Operator."""
    return host_cluster.driver == HostCluster.Driver.KUBERNETES and bool(
        host_cluster.addons.get("gpu_operator")
    )


def run_partition_pass(host_cluster: HostCluster, api: KubeApi) -> PartitionOutcome | None:
    """The partition pass, failing soft: a cluster that cannot be read now keeps its stored state (and
    tenants' quotas keep counting what was last advertised); the error is kept on the host cluster."""
    if not manages_partitions(host_cluster):
        return None
    try:
        return reconcile_partitions(host_cluster, api)
    except (DriverError, EngineError) as exc:  # EngineError: a hand-edited layout the model cannot hold
        log.warning("partition pass failed", extra={"host_cluster": host_cluster.name, "error": str(exc)})
        if host_cluster.partitions.get("error") != str(exc):
            host_cluster.partitions = {**host_cluster.partitions, "error": str(exc)}
            host_cluster.save(update_fields=["partitions"])
        return None
