"""The dedication pass: which host nodes are dedicated to which isolated tenant, persisted and sticky
(docs/kubernetes.md, "Dedicated nodes").

For every isolated tenant of a host cluster it keeps enough whole, healthy nodes of each GPU model to cover
the tenant's guarantees of that model: the nodes it already holds first, then new ones carved compactly in
the topology by the placement engine (`FleetModel.carve`, the engine's `carve_pool`) from empty shared
nodes. A node the tenant no longer needs (its guarantee went down, the node's model is no longer guaranteed,
the tenant stopped being isolated or is being deleted) is returned to the shared pool only once none of the
tenant's pods runs there: what runs where is what the cluster shows (`occupied`), or, on a simulated host
cluster, the running simulated pods.

The result is rows (`tenants.DedicatedNode`), each change audited: the placement model reads them
(`FleetModel._dedicate_pools`), quota admission counts them (`tenants.capacity`), and the reconciler labels
and taints the nodes (`clusters.reconcile.dedicated`). Runs on every reconcile of a host cluster, under its
reconcile lock; a second run with nothing changed writes nothing.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Collection, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

from django.db import transaction
from django.db.models import Sum

from core import audit
from core.audit import Actor
from fleet.models import GpuClass, HostCluster, Node
from placement.engine import EngineError
from placement.service import LIVE_STATES, FleetModel
from tenants.models import DedicatedNode, Quota, Tenant

log = logging.getLogger(__name__)
DEDICATOR = Actor.system("dedication")

Occupied = Mapping[str, Collection[str]]  # node name -> slugs of the tenants with a pod running there


@dataclass
class DedicationOutcome:
    """What one pass decided: every dedicated node after it, and what changed."""

    host_cluster: str = ""
    dedicated: dict[str, str] = field(default_factory=dict)  # node name -> tenant slug
    carved: list[tuple[str, str]] = field(default_factory=list)  # (node, slug) newly dedicated
    returned: list[tuple[str, str]] = field(default_factory=list)  # (node, slug) given back to the pool
    # slug -> GPU model -> GPUs of its guarantee no whole healthy empty node was left to cover
    short: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def writes(self) -> int:
        return len(self.carved) + len(self.returned)


def dedicate_nodes(host_cluster: HostCluster, occupied: Occupied | None = None) -> DedicationOutcome:
    """One dedication pass over a host cluster (see the module docstring). `occupied`: which tenants' pods
    the cluster shows on each node; None on a simulated host cluster (its running simulated pods say)."""
    outcome = DedicationOutcome(host_cluster=host_cluster.name)
    live_isolated = Tenant.objects.filter(
        cluster__host_cluster=host_cluster, state__in=LIVE_STATES, trust_tier=Tenant.TrustTier.ISOLATED
    )
    held = DedicatedNode.objects.filter(node__host_cluster=host_cluster)
    # The usual host cluster has no isolated tenant and no node held: two reads, and no fleet model built.
    if not live_isolated.exists() and not held.exists():
        return outcome
    if not Node.objects.filter(host_cluster=host_cluster).exists():
        return outcome
    with transaction.atomic():
        # Rows are locked so that two passes (a reconcile and a simulator tick) never carve the same node.
        rows = list(
            DedicatedNode.objects.select_for_update()
            .filter(node__host_cluster=host_cluster)
            .select_related("node", "tenant")
        )
        model = FleetModel.build(host_cluster)
        if occupied is None:
            occupied = _occupied_by_pods(model)
        isolated = set(model.isolated)
        for row in rows:
            if row.tenant.slug not in isolated and row.tenant.slug not in occupied.get(row.node.name, ()):
                _return(row, outcome, why="the tenant is no longer isolated, or is being deleted")
        kept = [row for row in rows if (row.node.name, row.tenant.slug) not in outcome.returned]
        guarantees = _guarantees(host_cluster)
        tenants = {t.slug: t for t in Tenant.objects.filter(slug__in=isolated)}
        for slug in sorted(isolated):
            _cover(model, tenants[slug], guarantees.get(slug, {}), occupied, outcome)
            mine = [r for r in kept if r.tenant.slug == slug]
            _return_surplus(model, slug, guarantees.get(slug, {}), mine, occupied, outcome)
        returned = set(outcome.returned)
        outcome.dedicated = {
            r.node.name: r.tenant.slug for r in kept if (r.node.name, r.tenant.slug) not in returned
        }
        outcome.dedicated.update(dict(outcome.carved))
    if outcome.short:
        log.warning(
            "isolated tenants' guarantees not covered by whole nodes",
            extra={"host_cluster": host_cluster.name, "short": outcome.short},
        )
    return outcome


def dedicated_nodes(host_cluster: HostCluster) -> dict[str, str]:
    """Node name -> slug of the tenant it is dedicated to, as persisted (one query)."""
    rows = DedicatedNode.objects.filter(node__host_cluster=host_cluster)
    return dict(rows.values_list("node__name", "tenant__slug"))


def _occupied_by_pods(model: FleetModel) -> dict[str, set[str]]:
    occupied: dict[str, set[str]] = defaultdict(set)
    for pod in model.pods:
        if pod.tenant is not None:
            occupied[pod.node.name].add(pod.tenant.slug)
    return occupied


def _guarantees(host_cluster: HostCluster) -> dict[str, dict[str, int]]:
    """slug -> GPU model -> whole GPUs guaranteed, for the live isolated tenants of the host cluster."""
    rows = (
        Quota.objects.filter(
            tenant__cluster__host_cluster=host_cluster,
            tenant__state__in=LIVE_STATES,
            tenant__trust_tier=Tenant.TrustTier.ISOLATED,
            gpu_class__kind=GpuClass.Kind.WHOLE,
            guaranteed__gt=0,
        )
        .values_list("tenant__slug", "gpu_class__gpu_model__slug")
        .annotate(n=Sum("guaranteed"))
        .order_by("tenant__slug", "gpu_class__gpu_model__slug")
    )
    out: dict[str, dict[str, int]] = defaultdict(dict)
    for slug, model, n in rows:
        out[slug][model] = n
    return out


def _healthy_gpus(model: FleetModel, i: int) -> int:
    """GPUs of node `i` in service: none on a node out of service, else its healthy GPUs."""
    fleet = model.engine.fleet
    if not fleet.node_healthy[i]:
        return 0
    return int(fleet.gpu_healthy[i, : fleet.gpu_count[i]].sum())


def _pool_of(model: FleetModel, slug: str, gpu_model: str) -> list[int]:
    fleet = model.engine.fleet
    return [i for i in model.pool(slug) if fleet.specs[i].model == gpu_model]


def _cover(
    model: FleetModel,
    tenant: Tenant,
    guarantees: Mapping[str, int],
    occupied: Occupied,
    out: DedicationOutcome,
) -> None:
    """Carve whole nodes for each GPU model whose guarantee the tenant's healthy nodes do not cover."""
    fleet = model.engine.fleet
    for gpu_model, guaranteed in sorted(guarantees.items()):
        have = sum(_healthy_gpus(model, i) for i in _pool_of(model, tenant.slug, gpu_model))
        if have >= guaranteed:
            continue
        # Only nodes no tenant's pod runs on may be carved: a taint does not evict what already runs.
        busy = [n for n in fleet.names if occupied.get(n)]
        with _hidden(model, busy):
            try:
                names = model.carve(tenant.slug, gpu_model, guaranteed - have)
            except EngineError:
                names = []
        for name in names:
            _carve(model, tenant, name, out)
        have = sum(_healthy_gpus(model, i) for i in _pool_of(model, tenant.slug, gpu_model))
        if have < guaranteed:
            out.short.setdefault(tenant.slug, {})[gpu_model] = guaranteed - have


def _return_surplus(
    model: FleetModel,
    slug: str,
    guarantees: Mapping[str, int],
    rows: list[DedicatedNode],
    occupied: Occupied,
    out: DedicationOutcome,
) -> None:
    """Return the tenant's persisted nodes its guarantees no longer need and none of its pods runs on.

    Kept first: nodes running its pods, then healthy ones in topology order (the carve's own order), until
    the guarantee of their model is covered."""
    fleet = model.engine.fleet
    by_model: dict[str, list[DedicatedNode]] = defaultdict(list)
    for row in rows:
        by_model[fleet.specs[fleet.node(row.node.name)].model].append(row)
    for gpu_model, mine in by_model.items():

        def keep_first(row: DedicatedNode) -> tuple[bool, bool, int]:
            i = fleet.node(row.node.name)
            return (slug not in occupied.get(row.node.name, ()), not _healthy_gpus(model, i), i)

        # Nodes carved in this pass are needed (they were carved for the shortfall): they count first.
        carved = [
            fleet.node(n)
            for n, s in out.carved
            if s == slug and fleet.specs[fleet.node(n)].model == gpu_model
        ]
        covered = sum(_healthy_gpus(model, i) for i in carved)
        for row in sorted(mine, key=keep_first):
            needed = covered < guarantees.get(gpu_model, 0)
            covered += _healthy_gpus(model, fleet.node(row.node.name))
            if not needed and slug not in occupied.get(row.node.name, ()):
                _return(row, out, why=f"its {gpu_model} guarantee is covered without it")
                fleet.dedicate([row.node.name], None)


def _carve(model: FleetModel, tenant: Tenant, name: str, out: DedicationOutcome) -> None:
    DedicatedNode.objects.create(node=model.nodes[name], tenant=tenant)
    audit.record(
        DEDICATOR,
        "node.dedicated",
        object_type="node",
        object_id=f"{out.host_cluster}/{name}",
        tenant=tenant,
        after={"tenant": tenant.slug, "host_cluster": out.host_cluster},
    )
    out.carved.append((name, tenant.slug))


def _return(row: DedicatedNode, out: DedicationOutcome, *, why: str) -> None:
    row.delete()
    audit.record(
        DEDICATOR,
        "node.returned",
        object_type="node",
        object_id=f"{out.host_cluster}/{row.node.name}",
        tenant=row.tenant,
        before={"tenant": row.tenant.slug, "host_cluster": out.host_cluster},
        after={"reason": why},
    )
    out.returned.append((row.node.name, row.tenant.slug))


@contextmanager
def _hidden(model: FleetModel, names: Collection[str]) -> Iterator[None]:
    """Hide these nodes from a carve (as if out of service); their health is put back after."""
    fleet = model.engine.fleet
    hidden = [n for n in names if fleet.node_healthy[fleet.node(n)]]
    for name in hidden:
        fleet.quarantine_node(name)
    try:
        yield
    finally:
        for name in hidden:
            fleet.quarantine_node(name, quarantined=False)
