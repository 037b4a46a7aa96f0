"""Capacity per host cluster and GPU class, what tenants' guarantees already take of it, and admission.

A tenant's cluster lives on one host cluster, so its guarantees are admitted against that host cluster's
GPUs only. A MIG or shared class is counted in whole GPUs of its model, each class packed on its own GPUs
(⌈units / units per GPU⌉), so the guarantees of all classes of one model on a host cluster never need more
healthy GPUs than that host cluster has (healthy: in service, `fleet.selectors.IN_SERVICE`). Mixing profiles
on one GPU could fit more; the MIG planner may refine this, but admission never promises what the hardware
cannot hold.

An isolated tenant's guarantee takes whole nodes (docs/kubernetes.md, "Dedicated nodes"): the nodes
dedicated to it (`DedicatedNode`, kept by the dedication pass), and, where they do not cover its guarantee,
as many more free nodes as would: a guarantee of 3 GPUs on 8-GPU nodes holds a whole node. Nodes held so
for one isolated tenant are out of reach of every other tenant's guarantee; the shared pool (the other
tiers) is what is left. Counting node by node, a free node is taken for a shortfall the smallest that covers
it, else the largest (`_take`): the dedication pass carves compactly in the topology instead, so on a fleet of
mixed node sizes admission may refuse a guarantee some other choice of nodes could hold, never the reverse.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from django.db import transaction
from django.db.models import Count, Sum

from fleet.models import Gpu, GpuClass, GpuModel, HostCluster, NodePartition
from fleet.selectors import IN_SERVICE, SERVING
from gpucloud.errors import CapacityExceeded, Conflict, ValidationFailed
from tenants import tiers
from tenants.models import AdmissionLock, DedicatedNode, Quota, Tenant

Key = tuple[str, str]  # (host cluster name, GPU model slug)
Quotaholder = tuple[Tenant, GpuClass]  # one quota: (tenant, GPU class)


@dataclass(frozen=True)
class ClassCapacity:
    host_cluster: str
    gpu_class: str
    gpu_model: str
    kind: str
    capacity: int  # units the host cluster's healthy GPUs could give if they held only this class
    guaranteed: int  # units guaranteed to tenants of the host cluster
    available: int  # units that can still be guaranteed there, given every class of the same model
    healthy_gpus: int  # healthy GPUs of the model in the host cluster
    # Units the nodes advertise now (MIG slices once the MIG manager reported success, time-sliced replicas),
    # on host clusters whose partitions gpucloud manages; None elsewhere.
    advertised: int | None = None
    # Healthy GPUs of the model on whole nodes held for isolated tenants (dedicated to them, or needed to
    # cover their guarantees): out of reach of every other guarantee, `available` included.
    dedicated_gpus: int = 0


@dataclass
class Carving:
    """Whole nodes of one GPU model held for isolated tenants, and what is left to the shared pool."""

    held: dict[int, list[int]]  # tenant id -> node ids held for it
    free: dict[int, int]  # node id -> GPUs in service, nodes held for nobody
    short: dict[int, int]  # tenant id -> GPUs of its guarantee no free node was left to cover

    @property
    def shared_gpus(self) -> int:
        return sum(self.free.values())


@dataclass
class ModelNodes:
    """One GPU model on one host cluster, node by node: what an isolated tenant's guarantee is counted in."""

    nodes: dict[int, int] = field(default_factory=dict)  # node id -> GPUs in service
    owners: dict[int, int] = field(default_factory=dict)  # node id -> tenant id it is dedicated to
    isolated: dict[int, int] = field(default_factory=dict)  # tenant id -> whole GPUs guaranteed

    @property
    def healthy(self) -> int:
        return sum(self.nodes.values())

    def gpus_of(self, tenant_id: int) -> int:
        return sum(self.nodes.get(n, 0) for n, owner in self.owners.items() if owner == tenant_id)

    def carve(self) -> Carving:
        """Each isolated tenant holds its dedicated nodes, plus free ones until its guarantee is covered
        (tenants in id order: the first admitted first)."""
        held: dict[int, list[int]] = defaultdict(list)
        for node, owner in sorted(self.owners.items()):
            held[owner].append(node)
        free = {n: gpus for n, gpus in sorted(self.nodes.items()) if n not in self.owners}
        short = {}
        for tenant_id, guaranteed in sorted(self.isolated.items()):
            need = guaranteed - self.gpus_of(tenant_id)
            for node in _take(free, need):
                need -= free.pop(node)
                held[tenant_id].append(node)
            if need > 0:
                short[tenant_id] = need
        return Carving(dict(held), free, short)


def _take(free: dict[int, int], need: int) -> list[int]:
    """Free nodes (id -> GPUs) to cover `need` GPUs: each time the smallest node that covers what is left,
    else the largest (fewest GPUs stranded). All of them when they do not cover it."""
    room, taken = dict(free), []
    while need > 0 and room:
        covering = [n for n, gpus in room.items() if gpus >= need]
        node = (
            min(covering, key=lambda n: (room[n], n)) if covering else max(room, key=lambda n: (room[n], -n))
        )
        need -= room.pop(node)
        taken.append(node)
    return taken


def model_nodes(
    host_cluster: HostCluster | None,
    gpu_model: GpuModel | None,
    isolated: dict[Key, dict[int, int]],
) -> dict[Key, ModelNodes]:
    """Per (host cluster, GPU model): GPUs in service node by node and the nodes dedicated to isolated
    tenants (two queries), with the `isolated` tenants' guarantees (`Guarantees.isolated`)."""
    out: dict[Key, ModelNodes] = defaultdict(ModelNodes)
    gpus = Gpu.objects.filter(IN_SERVICE)
    dedicated = DedicatedNode.objects.all()
    if host_cluster is not None:
        gpus = gpus.filter(node__host_cluster=host_cluster)
        dedicated = dedicated.filter(node__host_cluster=host_cluster)
    if gpu_model is not None:
        gpus = gpus.filter(gpu_model=gpu_model)
    model_of: dict[int, Key] = {}
    for cluster, model, node, n in (
        gpus.values_list("node__host_cluster__name", "gpu_model__slug", "node_id")
        .annotate(n=Count("id"))
        .order_by()
    ):
        out[(cluster, model)].nodes[node] = n
        model_of[node] = (cluster, model)
    for node, tenant_id in dedicated.values_list("node_id", "tenant_id"):
        if node in model_of:  # a node with no GPU in service holds nothing to count
            out[model_of[node]].owners[node] = tenant_id
    for key, per_tenant in isolated.items():
        out[key].isolated.update(per_tenant)
    return dict(out)


@dataclass
class Guarantees:
    """Units guaranteed to tenants that are not deleted, read in one query (see `guarantees`)."""

    all: dict[tuple[str, str], int] = field(default_factory=dict)  # (host cluster, class) -> units
    shared: dict[tuple[str, str], int] = field(default_factory=dict)  # the same, tenants not isolated
    isolated: dict[Key, dict[int, int]] = field(default_factory=dict)  # (cluster, model) -> tenant id -> GPUs


def guarantees(
    host_cluster: HostCluster | None = None,
    exclude: Quotaholder | None = None,
    gpu_model: GpuModel | None = None,
) -> Guarantees:
    """Guarantees of tenants that are not deleted, leaving out `exclude`'s quota (the one being replaced).
    Only that one quota: the tenant's guarantees of the other classes of the model hold GPUs as much as
    anyone else's do. With `gpu_model`, its classes only. Isolated tenants' (whole GPUs, held in whole nodes)
    are kept apart from the shared pool's."""
    # Quotas guaranteeing nothing add nothing: leaving them out before the join keeps this cheap when most
    # tenants only burst (guarantees are never negative).
    quotas = Quota.objects.filter(guaranteed__gt=0).exclude(tenant__state=Tenant.State.DELETED)
    if host_cluster is not None:
        quotas = quotas.filter(tenant__cluster__host_cluster=host_cluster)
    if gpu_model is not None:
        quotas = quotas.filter(gpu_class__gpu_model=gpu_model)
    if exclude is not None:
        quotas = quotas.exclude(tenant=exclude[0], gpu_class=exclude[1])
    rows = quotas.values_list(
        "tenant__cluster__host_cluster__name",
        "gpu_class__name",
        "gpu_class__gpu_model__slug",
        "tenant_id",
        "tenant__trust_tier",
    ).annotate(total=Sum("guaranteed"))
    out = Guarantees()
    for cluster, name, model, tenant_id, tier, units in rows.order_by():
        out.all[(cluster, name)] = out.all.get((cluster, name), 0) + units
        if tier == Tenant.TrustTier.ISOLATED:  # isolated tenants hold whole GPUs only (tenants.tiers)
            per_tenant = out.isolated.setdefault((cluster, model), {})
            per_tenant[tenant_id] = per_tenant.get(tenant_id, 0) + units
        else:
            out.shared[(cluster, name)] = out.shared.get((cluster, name), 0) + units
    return out


def gpus_by_host_and_model(host_cluster: HostCluster | None = None) -> dict[Key, tuple[int, int]]:
    """(all GPUs, healthy GPUs on ready nodes) per (host cluster, GPU model); a retired host cluster has no
    row: it is no capacity (`fleet.selectors.SERVING`)."""
    gpus = Gpu.objects.filter(node__host_cluster__in=HostCluster.objects.filter(SERVING))
    if host_cluster is not None:
        gpus = gpus.filter(node__host_cluster=host_cluster)
    rows = gpus.values("node__host_cluster__name", "gpu_model__slug").annotate(
        total=Count("id"), healthy=Count("id", filter=IN_SERVICE)
    )
    return {(r["node__host_cluster__name"], r["gpu_model__slug"]): (r["total"], r["healthy"]) for r in rows}


def guaranteed_by_class(
    host_cluster: HostCluster | None = None,
    exclude: Quotaholder | None = None,
    gpu_model: GpuModel | None = None,
) -> dict[tuple[str, str], int]:
    """Units guaranteed per (host cluster name, GPU class name) to tenants that are not deleted, leaving out
    `exclude`'s quota (see `guarantees`). With `gpu_model`, its classes only."""
    return guarantees(host_cluster, exclude, gpu_model).all


def gpus_needed(gpu_class: GpuClass, units: int) -> int:
    return math.ceil(units / gpu_class.units_per_gpu())


def _held(guaranteed: dict[tuple[str, str], int], classes: dict[str, GpuClass]) -> dict[Key, int]:
    """GPUs the guarantees hold per (host cluster, GPU model), each class packed on its own GPUs."""
    held: dict[Key, int] = defaultdict(int)
    for (cluster, name), units in guaranteed.items():
        held[(cluster, classes[name].gpu_model.slug)] += gpus_needed(classes[name], units)
    return held


def capacity_table(
    host_cluster: HostCluster | None = None,
    exclude: Quotaholder | None = None,
    classes: list[GpuClass] | None = None,
) -> list[ClassCapacity]:
    """One row per host cluster and GPU class of a model the host cluster has GPUs of (or guarantees of),
    ordered by host cluster and class; six queries whatever the size of the fleet (five when the caller
    gives the catalog's `classes`, with their models)."""
    if classes is None:
        classes = list(GpuClass.objects.select_related("gpu_model"))
    gpus = gpus_by_host_and_model(host_cluster)
    given = guarantees(host_cluster, exclude)
    guaranteed, shared = given.all, given.shared
    by_name = {c.name: c for c in classes}
    held = _held(shared, by_name)
    nodes = model_nodes(host_cluster, None, given.isolated)
    pools = {key: of_model.carve().shared_gpus for key, of_model in nodes.items()}
    keys = set(gpus) | {(cluster, by_name[name].gpu_model.slug) for cluster, name in guaranteed}
    offered = advertised_units(host_cluster)
    rows = []
    for cluster, model in keys:
        healthy = gpus.get((cluster, model), (0, 0))[1]
        pool = Pool(healthy, pools.get((cluster, model), healthy), shared, held)
        rows += [
            _row(cluster, c, pool, guaranteed, offered)
            for c in classes
            if c.gpu_model.slug == model and cluster is not None
        ]
    return sorted(rows, key=lambda r: (r.host_cluster, r.gpu_class))


@dataclass(frozen=True)
class Pool:
    """What guarantees of one model on one host cluster are admitted against, outside isolated tenants."""

    healthy: int  # GPUs in service
    shared_gpus: int  # of them, on nodes no isolated tenant holds
    guaranteed: dict[
        tuple[str, str], int
    ]  # units guaranteed per (host cluster, class) to shared-pool tenants
    held: dict[Key, int]  # whole GPUs those guarantees hold per (host cluster, model)


def _row(
    cluster: str,
    gpu_class: GpuClass,
    pool: Pool,
    guaranteed: dict[tuple[str, str], int],
    offered: dict[str, dict[str, int]] | None = None,
) -> ClassCapacity:
    model = gpu_class.gpu_model.slug
    on_cluster = (offered or {}).get(cluster)
    per_gpu = gpu_class.units_per_gpu()
    mine = pool.guaranteed.get((cluster, gpu_class.name), 0)
    # GPUs held by the other classes of this model, and nodes held for isolated tenants, are out of reach.
    free_gpus = pool.shared_gpus - (pool.held[(cluster, model)] - gpus_needed(gpu_class, mine))
    return ClassCapacity(
        host_cluster=cluster,
        gpu_class=gpu_class.name,
        gpu_model=model,
        kind=gpu_class.kind,
        capacity=pool.healthy * per_gpu,
        guaranteed=guaranteed.get((cluster, gpu_class.name), 0),
        available=max(0, free_gpus * per_gpu - mine),
        healthy_gpus=pool.healthy,
        advertised=None if on_cluster is None else on_cluster.get(gpu_class.name, 0),
        dedicated_gpus=pool.healthy - pool.shared_gpus,
    )


def advertised_units(host_cluster: HostCluster | None = None) -> dict[str, dict[str, int]]:
    """Units per GPU class the nodes advertise, per host cluster whose partitions gpucloud manages (those
    with partition rows); one query."""
    rows = NodePartition.objects.all()
    if host_cluster is not None:
        rows = rows.filter(node__host_cluster=host_cluster)
    out: dict[str, dict[str, int]] = {}
    for cluster, offered in rows.values_list("node__host_cluster__name", "advertised"):
        per_class = out.setdefault(cluster, {})
        for name, units in offered.items():
            per_class[name] = per_class.get(name, 0) + units
    return out


def capacity_of(
    gpu_class: GpuClass,
    host_cluster: HostCluster,
    exclude: Quotaholder | None = None,
    classes: list[GpuClass] | None = None,
) -> ClassCapacity:
    """The row of one class on one host cluster, as `capacity_table` has it (zero capacity if the host
    cluster has none of its GPUs), read for the class's model only: quota admission asks it under its lock.
    `classes`, the classes of the model, may be given when the caller has them. `available` is what a tenant
    of the shared pool could still be guaranteed; an isolated tenant's is `isolated_room`'s."""
    model = gpu_class.gpu_model
    if classes is None:
        classes = classes_of(model)
    given = guarantees(host_cluster, exclude, model)
    key = (host_cluster.name, model.slug)
    nodes = model_nodes(host_cluster, model, given.isolated).get(key, ModelNodes())
    held = _held(given.shared, {c.name: c for c in classes})
    pool = Pool(nodes.healthy, nodes.carve().shared_gpus, given.shared, held)
    return _row(host_cluster.name, gpu_class, pool, given.all)


@dataclass(frozen=True)
class IsolatedRoom:
    """What an isolated tenant's guarantee of one model can be on its host cluster, in whole nodes."""

    fits: bool  # the guarantee asked for fits
    own_gpus: int  # GPUs in service on the nodes dedicated to it
    own_nodes: int
    free_gpus: int  # GPUs in service on nodes held for no isolated tenant
    free_nodes: int
    shared_needs: int  # GPUs of those the shared pool's guarantees hold
    most: int  # the largest guarantee it can hold: its nodes and the free nodes the shared pool can spare


def isolated_room(
    tenant: Tenant, gpu_class: GpuClass, host_cluster: HostCluster, guaranteed: int, classes: list[GpuClass]
) -> IsolatedRoom:
    """Whether `tenant` (isolated) can hold `guaranteed` whole GPUs of the class's model in whole nodes, next
    to every other isolated tenant's nodes and the shared pool's guarantees, and how much it could."""
    model = gpu_class.gpu_model
    key = (host_cluster.name, model.slug)
    given = guarantees(host_cluster, (tenant, gpu_class), model)
    nodes = model_nodes(host_cluster, model, given.isolated).get(key, ModelNodes())
    carving = nodes.carve()  # the others' nodes; the tenant's own are held for it whatever its guarantee
    shared_needs = sum(_held(given.shared, {c.name: c for c in classes}).values())
    own = carving.held.get(tenant.pk, [])
    own_gpus = sum(nodes.nodes[n] for n in own)
    taken = sum(carving.free[n] for n in _take(carving.free, guaranteed - own_gpus))
    fits = own_gpus + taken >= guaranteed and carving.shared_gpus - taken >= shared_needs
    spare, extra = carving.shared_gpus - shared_needs, 0
    for gpus in sorted(carving.free.values(), reverse=True):
        if gpus <= spare:
            spare, extra = spare - gpus, extra + gpus
    free = (carving.shared_gpus, len(carving.free))
    return IsolatedRoom(fits, own_gpus, len(own), *free, shared_needs, own_gpus + extra)


def classes_of(gpu_model: GpuModel) -> list[GpuClass]:
    """Every class of a GPU model (whole, MIG, shared), each knowing its model without another query."""
    classes = list(GpuClass.objects.filter(gpu_model=gpu_model))
    for gpu_class in classes:
        gpu_class.gpu_model = gpu_model
    return classes


def host_cluster_of(tenant: Tenant) -> HostCluster:
    """The host cluster a tenant's guarantees are admitted on: the one its tenant cluster lives on.

    Every tenant gets one when it is created (named, or picked by `pick_host_cluster`), so a tenant without
    one is an inconsistency to repair, not something to guess around.
    """
    cluster = HostCluster.objects.filter(tenant_clusters__tenant=tenant).first()
    if cluster is None:
        raise Conflict(f"tenant {tenant.slug} has no tenant cluster, so no host cluster to guarantee GPUs on")
    return cluster


def lock_admission(host_cluster: HostCluster, gpu_model: GpuModel) -> None:
    """Serialise admission per (host cluster, GPU model) until the caller's transaction ends.

    Every class of a model (whole, MIG, shared) holds whole GPUs of it, so locking the class row is not
    enough: two requests for different classes would each see the other's GPUs as free. The lock row is made
    on first use; a concurrent first use waits on the unique key and then locks the same row.
    """
    _lock_admission_row(host_cluster.pk, gpu_model.pk)


def lock_admissions(keys: Iterable[tuple[int, int]]) -> None:
    """Lock the admission rows of these (host cluster id, GPU model id) in that order, the global order of
    admission locks ("Lock order" in `tenants/services/__init__.py`): for a transaction that admits several
    models."""
    for host_cluster_id, gpu_model_id in sorted(set(keys)):
        _lock_admission_row(host_cluster_id, gpu_model_id)


def _lock_admission_row(host_cluster_id: int, gpu_model_id: int) -> None:
    rows = AdmissionLock.objects.filter(host_cluster_id=host_cluster_id, gpu_model_id=gpu_model_id)
    if rows.select_for_update().exists():  # the usual case: the row is there, and now locked (one statement)
        return
    AdmissionLock.objects.get_or_create(host_cluster_id=host_cluster_id, gpu_model_id=gpu_model_id)
    rows.select_for_update().get()


def _lacks_hami(host_cluster: HostCluster, gpu_class: GpuClass) -> bool:
    """HAMi fractions exist only where HAMi serves them: not on a Kubernetes host cluster without it."""
    return (
        gpu_class.kind == GpuClass.Kind.FRACTION
        and host_cluster.driver == HostCluster.Driver.KUBERNETES
        and not host_cluster.addons.get("hami")
    )


def _require_hami(host_cluster: HostCluster, gpu_class: GpuClass) -> None:
    if _lacks_hami(host_cluster, gpu_class):
        message = (
            f"{gpu_class.name} is a HAMi fraction, and host cluster {host_cluster.name} does not run HAMi "
            "(no GPU node carries hami.io/node-nvidia-register); see its conformance report"
        )
        raise ValidationFailed.on("gpu_class", message)


def admit(tenant: Tenant, gpu_class: GpuClass, guaranteed: int) -> None:
    """Admit a guarantee of the tenant, or refuse it (422) if the tenant's host cluster cannot hold it next to
    every other guarantee there, the tenant's own of the other classes of the model included. An isolated
    tenant's guarantee is counted in whole nodes (module docstring). Every path that sets a guarantee comes
    through here.

    Takes the (host cluster, GPU model) admission lock, held until the caller's transaction ends, so the
    caller's write of the guarantee is seen by the next admission of any class of that model.
    """
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("admit() must run inside the transaction that writes the guarantee")
    host_cluster = host_cluster_of(tenant)
    _require_hami(host_cluster, gpu_class)
    classes = classes_of(gpu_class.gpu_model)  # the catalog, read before the lock: it holds the lock shorter
    lock_admission(host_cluster, gpu_class.gpu_model)
    if tenant.trust_tier == Tenant.TrustTier.ISOLATED and guaranteed > 0:
        _admit_isolated(tenant, gpu_class, host_cluster, guaranteed, classes)
        return
    row = capacity_of(gpu_class, host_cluster, exclude=(tenant, gpu_class), classes=classes)
    if guaranteed <= row.available:
        return
    others_hold = (
        row.available < row.capacity - row.guaranteed - row.dedicated_gpus * gpu_class.units_per_gpu()
    )
    raise CapacityExceeded(
        f"{gpu_class.name}: asked to guarantee {guaranteed} on host cluster {row.host_cluster} (where tenant "
        f"{tenant.slug} runs), but its healthy capacity there is {row.capacity}, {row.guaranteed} is already "
        "guaranteed to other tenants"
        + (
            f", {row.dedicated_gpus} healthy {row.gpu_model} GPUs are on nodes held for isolated tenants"
            if row.dedicated_gpus
            else ""
        )
        + (f" and guarantees of other classes of {row.gpu_model} hold GPUs" if others_hold else "")
        + f", so at most {row.available} can be guaranteed there",
        errors={"guaranteed": [f"at most {row.available} is available on host cluster {row.host_cluster}"]},
        host_cluster=row.host_cluster,
        gpu_class=gpu_class.name,
        capacity=row.capacity,
        guaranteed=row.guaranteed,
        requested=guaranteed,
        available=row.available,
        **({"dedicated_gpus": row.dedicated_gpus} if row.dedicated_gpus else {}),
    )


def _admit_isolated(
    tenant: Tenant, gpu_class: GpuClass, host_cluster: HostCluster, guaranteed: int, classes: list[GpuClass]
) -> None:
    room = isolated_room(tenant, gpu_class, host_cluster, guaranteed, classes)
    if room.fits:
        return
    model = gpu_class.gpu_model.slug
    raise CapacityExceeded(
        f"{gpu_class.name}: asked to guarantee {guaranteed} to isolated tenant {tenant.slug} on host "
        f"cluster {host_cluster.name}, but an isolated tenant's guarantee takes whole nodes: it holds "
        f"{room.own_gpus} healthy {model} GPUs on {room.own_nodes} nodes dedicated to it, "
        f"{room.free_nodes} nodes ({room.free_gpus} GPUs) are held for no other isolated tenant, and the "
        f"shared pool's guarantees need {room.shared_needs} of those GPUs, so at most {room.most} can be "
        "guaranteed to it there",
        errors={
            "guaranteed": [
                f"at most {room.most} is available in whole nodes on host cluster {host_cluster.name}"
            ]
        },
        host_cluster=host_cluster.name,
        gpu_class=gpu_class.name,
        requested=guaranteed,
        available=room.most,
        dedicated_gpus=room.own_gpus,
        free_gpus=room.free_gpus,
        shared_needs=room.shared_needs,
    )


def classes_offered(
    *,
    trust_tier: str | None = None,
    host_cluster: HostCluster | None = None,
    keep: Iterable[str] = (),
) -> list[GpuClass]:
    """The GPU classes worth offering in a menu, by name: those of GPU models with GPUs in service
    (`fleet.selectors.IN_SERVICE`) on `host_cluster` (anywhere in the fleet when None) that `trust_tier`
    allows (any tier's when None) and the host cluster can serve; plus the classes named in `keep` (a quota
    held already stays editable).

    The catalog knows every model NVIDIA makes; offering a class of a model the fleet lacks, or one the tier
    forbids, only leads to a refusal after the form is sent. Admission still decides: this only narrows.
    """
    keep = set(keep)
    gpus = Gpu.objects.filter(IN_SERVICE)
    if host_cluster is not None:
        gpus = gpus.filter(node__host_cluster=host_cluster)
    in_service = GpuClass.objects.filter(gpu_model__in=gpus.values("gpu_model"))
    offered = []
    for gpu_class in (in_service | GpuClass.objects.filter(name__in=keep)).select_related("gpu_model"):
        fits = (trust_tier is None or tiers.allows(trust_tier, gpu_class)) and not (
            host_cluster is not None and _lacks_hami(host_cluster, gpu_class)
        )
        if fits or gpu_class.name in keep:
            offered.append(gpu_class)
    return sorted(offered, key=lambda c: c.name)


def pick_order() -> list[HostCluster]:
    """The host clusters that take new tenants (ready, not cordoned), best first: the most healthy GPUs not
    yet held by guarantees (ties: the name last in order)."""
    classes = {c.name: c for c in GpuClass.objects.select_related("gpu_model")}
    held = _held(guaranteed_by_class(), classes)
    free: dict[str, int] = defaultdict(int)
    for (cluster, model), (_, healthy) in gpus_by_host_and_model().items():
        free[cluster] += max(0, healthy - held[(cluster, model)])
    clusters = HostCluster.objects.filter(state=HostCluster.State.READY, cordoned_at__isnull=True)
    return sorted(clusters, key=lambda c: (free[c.name], c.name), reverse=True)


def pick_host_cluster() -> HostCluster:
    """Where a new tenant goes when none is named: the first of `pick_order`. What-if asks about a new tenant
    on the same one."""
    order = pick_order()
    if not order:
        cordoned = ", ".join(
            HostCluster.objects.filter(SERVING, cordoned_at__isnull=False).values_list("name", flat=True)
        )
        raise Conflict(
            "no host cluster is ready to take a tenant; register one or load a fleet first"
            + (f" (cordoned for new tenants: {cordoned})" if cordoned else "")
        )
    return order[0]
