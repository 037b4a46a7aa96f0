"""Quarantine and release: taking a GPU or a node out of service, and bringing it back.

The one writer of `Quarantine` rows and of the fleet's health flags (`Gpu.health`, `Node.state` quarantined),
which `fleet.selectors` reads as what is out of service. `health.services.observe` quarantines for a fatal
event; the health pass and the collection round release what has been clean for its window
(`release_clean`); a platform administrator releases by hand (`release`). Every change is audited, and tells
the platform administrators (`health.services.alerts`, by task name) and the health pass.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from core import audit
from core.audit import Actor
from fleet.health_rules import Finding
from fleet.models import Gpu, HostCluster, Node
from gpucloud.celery import HEALTH_NOTIFY, HEALTH_PASS, enqueue
from gpucloud.errors import Conflict, PermissionDenied
from health.models import HealthEvent, Quarantine

SYSTEM = Actor.system("health")
MAX_BACKOFF = 16  # the clean window doubles per recent quarantine, up to this many times its length


def quarantine(event: HealthEvent, at: datetime) -> Quarantine | None:
    """Take the event's GPU (a MIG slice's fault is its parent GPU's: DCGM names the parent) or node out of
    service, unless it is out already; a node whose GPUs are all out goes out whole. Audited."""
    node = Node.objects.select_for_update().get(pk=event.node_id)
    gpu = Gpu.objects.select_for_update().get(pk=event.gpu_id) if event.gpu_id else None
    if Quarantine.objects.filter(node=node, gpu=gpu, released_at__isnull=True).exists():
        return None
    reason = Finding(event.signal, event.value, event.severity, True, "", "").reason
    started = Quarantine.objects.create(node=node, gpu=gpu, event=event, reason=reason, started_at=at)
    if gpu is not None:
        gpu.health = Gpu.Health.QUARANTINED
        gpu.save(update_fields=["health"])
    else:
        node.state = Node.State.QUARANTINED
        node.save(update_fields=["state"])
    _audit("quarantine", started, {"event": event.public_id, "signal": event.signal, "value": event.value})
    transaction.on_commit(lambda: enqueue(HEALTH_NOTIFY, started.pk))
    transaction.on_commit(lambda: enqueue(HEALTH_PASS, node.host_cluster_id))
    if gpu is not None and not node.gpus.exclude(health=Gpu.Health.QUARANTINED).exists():
        whole = Quarantine.objects.filter(node=node, gpu=None, released_at__isnull=True).exists()
        if not whole:
            _quarantine_node_whole(node, event, at, reason)
    return started


def _quarantine_node_whole(node: Node, event: HealthEvent, at: datetime, reason: str) -> None:
    started = Quarantine.objects.create(node=node, gpu=None, event=event, reason=reason, started_at=at)
    if node.state != Node.State.QUARANTINED:
        node.state = Node.State.QUARANTINED
        node.save(update_fields=["state"])
    _audit("quarantine", started, {"event": event.public_id, "why": "every GPU of the node is quarantined"})


# What a quarantine and a release change, as the audit log shows it: "state: in service → quarantined".
STATES = {"quarantine": ("in service", "quarantined"), "release": ("quarantined", "in service")}


def _audit(verb: str, q: Quarantine, after: dict[str, str], actor: Actor = SYSTEM) -> None:
    kind = "gpu" if q.gpu_id else "node"
    object_id = q.gpu.uuid if q.gpu_id and q.gpu else q.node.name
    was, now = STATES[verb]
    after = {
        "state": now,
        "host_cluster": q.node.host_cluster.name,
        "node": q.node.name,
        "reason": q.reason,
        **after,
    }
    audit.record(
        actor, f"{kind}.{verb}", object_type=kind, object_id=object_id, before={"state": was}, after=after
    )


def required_clean(q: Quarantine) -> timedelta:
    """The clean window before `q` comes back by itself: doubled for each quarantine of the same GPU or node
    within `HEALTH_FLAP_WINDOW` before it, so a flapping part stays out longer each time."""
    since = q.started_at - timedelta(seconds=settings.HEALTH_FLAP_WINDOW)
    recent = Quarantine.objects.filter(
        node=q.node_id, gpu=q.gpu_id, started_at__gte=since, started_at__lte=q.started_at
    )
    factor = min(MAX_BACKOFF, 2 ** max(0, recent.count() - 1))
    return timedelta(seconds=settings.HEALTH_CLEAN_WINDOW * factor)


def release_clean(host_cluster: HostCluster, at: datetime, *, nodes: Iterable[Node] | None = None) -> int:
    """Release what has been clean for its window: GPUs first, then nodes. Returns how many came back."""
    quarantines = Quarantine.objects.filter(node__host_cluster=host_cluster, released_at__isnull=True)
    if nodes is not None:
        quarantines = quarantines.filter(node__in=nodes)
    released = 0
    for q in sorted(
        quarantines.select_related("node", "gpu", "node__host_cluster"), key=lambda q: q.gpu_id is None
    ):
        last_fault = _last_fault(q)
        if last_fault is None or at - last_fault < required_clean(q):
            continue
        window = required_clean(q).total_seconds()
        _release(q, at, SYSTEM, f"clean for {window:g} s")
        released += 1
    return released


def _last_fault(q: Quarantine) -> datetime | None:
    """When the target was last seen faulty; None while it still is (an open fatal event, or a node whose
    GPUs are all out). A node out only because its GPUs were counts from now once one is back."""
    fatal = HealthEvent.objects.filter(node=q.node_id, severity=HealthEvent.Severity.FATAL)
    fatal = fatal.filter(gpu=q.gpu_id) if q.gpu_id else fatal.filter(subject="node")
    if fatal.filter(closed_at__isnull=True).exists():
        return None
    if q.gpu_id is None and not q.node.gpus.exclude(health=Gpu.Health.QUARANTINED).exists():
        return None
    last = fatal.aggregate(last=Max("last_seen"))["last"]
    return last or q.started_at


def _release(q: Quarantine, at: datetime, actor: Actor, why: str) -> None:
    q.released_at, q.released_by, q.release_reason = at, actor.label[:150], why[:300]
    q.save(update_fields=["released_at", "released_by", "release_reason"])
    if q.gpu_id and q.gpu is not None:
        q.gpu.health = Gpu.Health.HEALTHY
        q.gpu.save(update_fields=["health"])
    elif q.node.state == Node.State.QUARANTINED:
        q.node.state = Node.State.READY
        q.node.save(update_fields=["state"])
    _audit("release", q, {"why": why}, actor)
    host_cluster_id = q.node.host_cluster_id
    transaction.on_commit(lambda: enqueue(HEALTH_PASS, host_cluster_id))


@transaction.atomic
def release(*, actor: Actor, node: Node, gpu: Gpu | None = None, reason: str = "") -> Quarantine:
    """A platform administrator puts a GPU or a node back into service. A signal still reported takes it
    out again at the next round: release after the repair."""
    if not actor.is_platform_admin:
        raise PermissionDenied("quarantined hardware is released by platform administrators only")
    q = (
        Quarantine.objects.select_for_update(of=("self",))
        .select_related("node", "gpu", "node__host_cluster")
        .filter(node=node, gpu=gpu, released_at__isnull=True)
        .first()
    )
    if q is None:
        what = f"GPU {gpu.index} of {node.name}" if gpu is not None else f"node {node.name}"
        raise Conflict(f"{what} is not quarantined")
    _release(q, timezone.now(), actor, reason or "released by a platform administrator")
    return q
