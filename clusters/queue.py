"""A tenant's queue: its waiting workloads in order, each with its position, the reason it waits in plain
words and an estimated start (`placement.queue_estimate`, docs/placement.md "Queue estimates").

The waiting workloads are the tenant's `fleet.PendingWorkload` rows: Kueue's pending Workloads, KAI's
unscheduled PodGroups, or the simulator's pods not placed yet. The order is the scheduler's where it says
(Kueue's visibility API gives a position), else the order the schedulers keep: higher priority first, then
creation time, then name (`PendingWorkloadQuerySet.in_queue_order`). Each entry carries the scheduler's own
words beside gpucloud's plain ones. Nothing is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.utils import timezone

from fleet.models import GpuClass, PendingWorkload
from placement import queue_estimate as qe
from placement.engine import EngineError
from placement.service import FleetModel
from tenants.models import Tenant

# Who holds a waiting workload once it fits, by the scheduler that reported it.
ADMITTER: dict[str, str] = {
    PendingWorkload.Source.KUEUE.value: "waiting for Kueue to admit it",
    PendingWorkload.Source.KAI.value: "waiting for KAI to schedule it",
    PendingWorkload.Source.SIMULATED.value: "waiting for the simulator's next step",
}
SCHEDULER: dict[str, str] = {
    PendingWorkload.Source.KUEUE.value: "Kueue",
    PendingWorkload.Source.KAI.value: "KAI",
}


@dataclass(frozen=True)
class Entry:
    """One pending workload of the tenant, where it stands."""

    name: str
    queue: str
    position: int  # 1 is next
    gpu_class: str
    gpus: int
    created_at: datetime | None
    reason: str
    estimated_start: datetime | None
    source: str = PendingWorkload.Source.KUEUE
    pods: int = 1
    priority: int = 0
    scheduler_message: str = ""  # why it waits, in the scheduler's own words

    @property
    def scheduler(self) -> str:
        """Who reported it, by name: Kueue, KAI or the simulator."""
        return SCHEDULER.get(self.source, "the simulator")


def pending(tenant: Tenant) -> list[PendingWorkload]:
    """The tenant's waiting workloads in queue order (see the module docstring)."""
    return list(PendingWorkload.objects.filter(tenant=tenant).in_queue_order())


def ahead(tenant: Tenant) -> list[tuple[GpuClass, int, str]]:
    """The tenant's pending workloads of known classes, as `queue_estimate.feasibility` takes them."""
    return PendingWorkload.objects.filter(tenant=tenant).ahead()


def tenant_queue(tenant: Tenant, at: datetime | None = None) -> list[Entry]:
    """The tenant's pending workloads with position, reason and estimated start, in queue order.

    The replay holds every tenant's waiting workloads of the tenant's host cluster (`cluster_order`), not the
    tenant's own only: another tenant's workload ahead takes GPUs this one would wait for (the largest error
    the estimate benchmark measured before, docs/placement.md "How wrong it has been").
    """
    rows = pending(tenant)
    if not rows:
        return []
    now = at or timezone.now()
    classes = {c.name: c for c in GpuClass.objects.select_related("gpu_model")}
    cluster = getattr(tenant, "cluster", None)
    model = None
    if cluster is not None and cluster.host_cluster is not None:
        try:
            model = FleetModel.build(cluster.host_cluster, now)
        except EngineError:
            model = None
    if model is None or cluster is None:
        return [
            _entry(w, i, "the tenant has no host cluster that can be modelled", None)
            for i, w in enumerate(rows)
        ]
    medians = qe.median_runtimes(model, now)
    everyone = cluster_order(cluster.host_cluster_id, tenant, rows)
    queue, uses, limits = [], {}, dict[str, int]()
    before: dict[tuple[int, int], int] = {}
    for owner in {w.tenant_id: w.tenant for w in everyone}.values():
        limits.update(qe.limits_of(owner))
    for w in everyone:
        gpu_class = classes.get(w.gpu_class)
        if gpu_class is None:
            continue
        owner = w.tenant
        if owner.pk == tenant.pk:
            ahead = before.get((owner.pk, gpu_class.pk), 0)
            uses[_key(w)] = qe.quota_use(tenant, gpu_class, w.gpus, model, ahead)
        before[(owner.pk, gpu_class.pk)] = before.get((owner.pk, gpu_class.pk), 0) + w.gpus
        runtime = timedelta(seconds=w.expected_seconds) if w.expected_seconds else medians.get(gpu_class.pk)
        queue.append(qe.queued(_key(w), gpu_class, w.gpus, owner, model, runtime))
    ends, held = qe.expected_ends(model, now, medians), qe.held_units(model)
    starts = qe.replay(model, ends, queue, now, held=held, limits=limits)
    out = []
    for i, w in enumerate(rows):
        gpu_class = classes.get(w.gpu_class)
        if gpu_class is None:
            out.append(
                _entry(w, i, f"{w.gpu_class or 'no GPU class'} is not a GPU class gpucloud offers", None)
            )
            continue
        start = starts.get(_key(w), qe.Start(None))
        text = qe.reason(gpu_class, w.gpus, uses[_key(w)], start, model, now)
        if start.at is not None and start.at <= now:
            # A row naming no scheduler is taken for Kueue's, the first writer (as `Entry.source` defaults).
            text = f"fits now: {ADMITTER.get(w.source, ADMITTER[PendingWorkload.Source.KUEUE.value])}"
        out.append(_entry(w, i, _placed(w) + text, start.at))
    return out


def cluster_order(host_cluster_id: int, tenant: Tenant, own: list[PendingWorkload]) -> list[PendingWorkload]:
    """Every tenant's waiting workloads on the host cluster in the order the replay tries them: each tenant's
    own queue order kept (`in_queue_order`), and between tenants, at each step the head with the higher
    priority, then the earlier creation, goes first (how Kueue's scheduler orders the heads of its
    ClusterQueues, fair sharing aside, and how KAI orders within a priority)."""
    per_tenant: dict[int, list[PendingWorkload]] = {tenant.pk: list(own)}
    others = (
        PendingWorkload.objects.filter(host_cluster_id=host_cluster_id)
        .exclude(tenant=tenant)
        .select_related("tenant")
        .in_queue_order()
    )
    for w in others:
        per_tenant.setdefault(w.tenant_id, []).append(w)
    for w in own:
        w.tenant = tenant  # already known: no query per row
    far = timezone.now() + qe.HORIZON * 1000
    heads = [(0, t) for t in per_tenant]
    out: list[PendingWorkload] = []
    while heads:
        index, chosen = min(
            heads,
            key=lambda h: (
                -per_tenant[h[1]][h[0]].priority,
                per_tenant[h[1]][h[0]].created_at or far,
                h[1] != tenant.pk,
                h[1],
            ),
        )
        out.append(per_tenant[chosen][index])
        heads.remove((index, chosen))
        if index + 1 < len(per_tenant[chosen]):
            heads.append((index + 1, chosen))
    return out


def _key(w: PendingWorkload) -> str:
    """A waiting workload's name in the replay: names repeat across tenants' namespaces."""
    return f"{w.namespace}/{w.name}"


def _placed(w: PendingWorkload) -> str:
    """ "position N in Kueue's queue: " where the scheduler gave one."""
    if w.position is None:
        return ""
    return f"position {w.position} in {SCHEDULER.get(w.source, 'its scheduler')}'s queue: "


def _entry(w: PendingWorkload, index: int, reason: str, start: datetime | None) -> Entry:
    return Entry(
        w.name,
        w.queue,
        index + 1,
        w.gpu_class,
        w.gpus,
        w.created_at,
        reason,
        start,
        source=w.source,
        pods=w.pods,
        priority=w.priority,
        scheduler_message=w.message,
    )
