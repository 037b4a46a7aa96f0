"""GPU and node health: events from DCGM rounds and node conditions, the quarantines they lead to, release.

The one writer of `HealthEvent` and `Quarantine` rows and of the fleet's health flags (`Gpu.health`,
`Node.state` quarantined). Metering calls `observe_round` inside its collection round, before it integrates
the round, so a fatal reading takes the GPU out (and out of billing) in the very round that showed it; the
health pass of `workers` calls `observe_nodes` with the node conditions its driver lists, and `release_clean`.
The rules are `fleet.health_rules`; `docs/health.md` says it all in prose.
"""

from __future__ import annotations

import json
import logging
import urllib.request
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import send_mail
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from core import audit
from core.audit import Actor
from fleet.health_rules import (
    DCGM_SIGNALS,
    FATAL,
    Finding,
    Rules,
    condition_source,
    gpu_findings,
    node_findings,
)
from fleet.models import Gpu, HostCluster, Node, placeholder_uuid
from gpucloud.celery import HEALTH_NOTIFY, HEALTH_PASS, enqueue
from gpucloud.errors import Conflict, PermissionDenied
from health.models import HealthEvent, Quarantine
from health.selectors import QuarantinedGpu, quarantine_share_by_model, quarantined_by_uuid

log = logging.getLogger(__name__)
SYSTEM = Actor.system("health")
MAX_BACKOFF = 16  # the clean window doubles per recent quarantine, up to this many times its length


@dataclass(frozen=True)
class NodeScrape:
    """What one node's DCGM scrape in a round said: the GPUs it listed as (UUID, index), their health fields,
    and the node's counters at its previous scrape with the seconds since (for counters)."""

    node: str
    seen: frozenset[tuple[str, int | None]]
    fields: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    previous: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    elapsed: float | None = None
    # The UUIDs it should list (its previous scrape's a round ago, and those missing since); None at first.
    expected: AbstractSet[str] | None = None


@dataclass(frozen=True)
class NodeReport:
    """A node as the host cluster's API shows it: the Ready status and every other condition."""

    name: str
    ready: str
    conditions: Mapping[str, tuple[str, str]] = field(default_factory=dict)


def rules() -> Rules:
    return Rules.from_settings(settings)


# --- DCGM rounds ----------------------------------------------------------------------------------------


def observe_round(
    host_cluster: HostCluster, at: datetime, scrapes: Sequence[NodeScrape]
) -> dict[str, QuarantinedGpu]:
    """Judge one collection round: adopt real UUIDs, open, update and close events, quarantine and release.

    Runs in the caller's transaction (the ingest of the round). Returns every GPU of the host cluster out of
    service now, by UUID, so the round bills none of their samples from then on.
    """
    # Only nodes whose scrape says something (a finding, GPUs listed differently from last time, a first
    # scrape) cost a read of their GPUs: a 10,000-GPU round of healthy nodes reads none.
    judge = rules()
    telling = [s.node for s in scrapes if _telling(s, judge)]
    gpus = Gpu.objects.filter(node__host_cluster=host_cluster, node__name__in=telling).select_related("node")
    by_node: dict[str, list[Gpu]] = defaultdict(list)
    for gpu in gpus:
        by_node[gpu.node.name].append(gpu)
    found: list[tuple[Node, Gpu | None, Finding]] = []
    for scrape in scrapes:
        node_gpus = by_node.get(scrape.node)
        if node_gpus:
            _adopt_uuids(scrape, node_gpus)
            found += _scrape_findings(scrape, node_gpus, judge)
    nodes = Node.objects.filter(host_cluster=host_cluster, name__in=[s.node for s in scrapes])
    if found or _anything_open(host_cluster):
        _record(host_cluster, at, found, nodes, sources=[HealthEvent.Source.DCGM], signals=DCGM_SIGNALS)
        release_clean(host_cluster, at, nodes=nodes)
    return quarantined_by_uuid(host_cluster)


def _telling(scrape: NodeScrape, judge: Rules) -> bool:
    listed = {uuid for uuid, _ in scrape.seen}
    if scrape.expected is None or scrape.expected != listed:
        return True
    previous = scrape.previous if scrape.elapsed is not None else None
    return any(
        gpu_findings(fields, previous.get(uuid, {}) if previous is not None else None, scrape.elapsed, judge)
        for uuid, fields in scrape.fields.items()
    )


def _scrape_findings(
    scrape: NodeScrape, node_gpus: list[Gpu], judge: Rules
) -> list[tuple[Node, Gpu | None, Finding]]:
    found: list[tuple[Node, Gpu | None, Finding]] = []
    listed = {uuid for uuid, _ in scrape.seen}
    expected = scrape.expected or set()
    for gpu in node_gpus:
        if gpu.uuid not in listed and gpu.uuid in expected:
            message = f"GPU {gpu.index} ({gpu.uuid}) is missing from its node's DCGM scrape; the node answers"
            missing = Finding("gpu_missing", str(gpu.index), FATAL, True, "reboot node", message)
            found.append((gpu.node, gpu, missing))
            continue
        fields = scrape.fields.get(gpu.uuid)
        if fields:
            previous = scrape.previous.get(gpu.uuid, {}) if scrape.elapsed is not None else None
            for finding in gpu_findings(fields, previous, scrape.elapsed, judge):
                found.append((gpu.node, gpu, finding))
    return found


def _adopt_uuids(scrape: NodeScrape, node_gpus: list[Gpu]) -> None:
    """GPUs imported from a host cluster carry placeholder UUIDs until DCGM shows the real one at their index;
    a UUID the fleet already knows is matched as it is."""
    known = {gpu.uuid for gpu in node_gpus}
    by_index = {gpu.index: gpu for gpu in node_gpus}
    for uuid, index in sorted(scrape.seen, key=lambda s: (s[1] is None, s[1] or 0, s[0])):
        gpu = by_index.get(index) if index is not None else None
        if (
            uuid in known
            or gpu is None
            or gpu.uuid != placeholder_uuid(gpu.node.host_cluster_id, gpu.node.name, gpu.index)
        ):
            continue
        if Gpu.objects.filter(uuid=uuid).exists():
            continue  # the UUID belongs to a GPU elsewhere in the fleet: leave both as they are
        log.info("GPU UUID adopted from DCGM", extra={"node": scrape.node, "index": index, "uuid": uuid})
        audit.record(
            SYSTEM,
            "gpu.uuid",
            object_type="gpu",
            object_id=uuid,
            before={"uuid": gpu.uuid},
            after={"uuid": uuid},
        )
        gpu.uuid = uuid
        gpu.save(update_fields=["uuid"])
        known.add(uuid)


def _anything_open(host_cluster: HostCluster) -> bool:
    return (
        HealthEvent.objects.filter(host_cluster=host_cluster, closed_at__isnull=True).exists()
        or Quarantine.objects.filter(node__host_cluster=host_cluster, released_at__isnull=True).exists()
    )


# --- node conditions ------------------------------------------------------------------------------------


def observe_nodes(host_cluster: HostCluster, at: datetime, reports: Iterable[NodeReport]) -> None:
    """Judge the node conditions the host cluster's API shows (Ready, Node Problem Detector, NVSentinel)."""
    with transaction.atomic():
        reports = list(reports)
        nodes = {
            n.name: n
            for n in Node.objects.filter(host_cluster=host_cluster, name__in=[r.name for r in reports])
        }
        found: list[tuple[Node, Gpu | None, Finding]] = []
        for report in reports:
            node = nodes.get(report.name)
            if node is not None:
                found += [(node, None, f) for f in node_findings(report.ready, report.conditions, rules())]
        sources = [HealthEvent.Source.KUBERNETES, HealthEvent.Source.NVSENTINEL]
        _record(host_cluster, at, found, list(nodes.values()), sources=sources, signals=None)


# --- events ---------------------------------------------------------------------------------------------


def _subject(gpu: Gpu | None) -> str:
    return f"gpu:{gpu.index}" if gpu is not None else "node"


def _source(finding: Finding) -> str:
    if finding.signal.startswith("condition:"):
        return condition_source(finding.signal.removeprefix("condition:"))
    if finding.signal == "node_not_ready":
        return HealthEvent.Source.KUBERNETES
    return HealthEvent.Source.DCGM


def _record(
    host_cluster: HostCluster,
    at: datetime,
    found: list[tuple[Node, Gpu | None, Finding]],
    nodes: Iterable[Node],
    *,
    sources: Sequence[str],
    signals: frozenset[str] | None,
) -> None:
    """Open or move on the events found, close those in scope no longer seen, quarantine for fatal ones."""
    scope = HealthEvent.objects.select_for_update().filter(
        node__in=nodes, closed_at__isnull=True, source__in=sources
    )
    if signals is not None:
        scope = scope.filter(signal__in=signals)
    open_events = {(e.node_id, e.subject, e.signal): e for e in scope}
    seen = set()
    for node, gpu, finding in found:
        key = (node.pk, _subject(gpu), finding.signal)
        seen.add(key)
        event = open_events.get(key)
        if event is not None and at > event.last_seen and event.severity != finding.severity:
            # another XID of another class (79 after a reset became 13): that event is over, this one starts
            event.closed_at = at
            event.save(update_fields=["closed_at"])
            event = None
        if event is None:
            event = _open(host_cluster, at, node, gpu, finding)
        elif at > event.last_seen:
            _move_on(event, at, finding)
        if finding.quarantine:
            quarantine(event, at)
    clear_after = timedelta(seconds=settings.HEALTH_EVENT_CLEAR_AFTER)
    for key, event in open_events.items():
        if key not in seen and at - event.last_seen >= clear_after:
            event.closed_at = at
            event.save(update_fields=["closed_at"])


def _open(
    host_cluster: HostCluster, at: datetime, node: Node, gpu: Gpu | None, finding: Finding
) -> HealthEvent:
    event = HealthEvent.objects.create(
        host_cluster=host_cluster,
        node=node,
        gpu=gpu,
        subject=_subject(gpu),
        signal=finding.signal,
        value=finding.value[:200],
        severity=finding.severity,
        action="quarantine" if finding.quarantine else "none",
        recommended=finding.recommended,
        message=finding.message[:500],
        source=_source(finding),
        first_seen=at,
        last_seen=at,
    )
    if finding.severity != HealthEvent.Severity.INFO:
        log.warning(
            "health event",
            extra={
                "node": node.name,
                "subject": event.subject,
                "signal": finding.signal,
                "value": finding.value,
            },
        )
    return event


def _move_on(event: HealthEvent, at: datetime, finding: Finding) -> None:
    """The same signal again: a gap longer than a round or two means it went away and came back (a flap)."""
    if (at - event.last_seen).total_seconds() > 2 * settings.METER_INTERVAL:
        event.occurrences += 1
    event.last_seen, event.value, event.message = at, finding.value[:200], finding.message[:500]
    if finding.quarantine:
        event.severity, event.action = finding.severity, "quarantine"
    event.save(update_fields=["last_seen", "value", "message", "severity", "action", "occurrences"])


# --- quarantine and release -----------------------------------------------------------------------------


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


# --- telling the platform administrators ---------------------------------------------------------------


def notify(quarantine_id: int) -> dict[str, Any] | None:
    """Tell the platform administrators (webhook and e-mail) that something was quarantined, and which GPU
    models have more than `HEALTH_ALERT_SHARE` of their GPUs out. Returns what was sent."""
    q = (
        Quarantine.objects.select_related("node__host_cluster", "gpu__gpu_model", "event")
        .filter(pk=quarantine_id)
        .first()
    )
    if q is None:
        return None
    target = f"GPU {q.gpu.index} ({q.gpu.uuid}) of node {q.node.name}" if q.gpu else f"node {q.node.name}"
    over = [m for m in quarantine_share_by_model() if m.share > settings.HEALTH_ALERT_SHARE]
    message: dict[str, Any] = {
        "kind": "gpucloud.health.quarantine",
        "host_cluster": q.node.host_cluster.name,
        "node": q.node.name,
        "gpu": q.gpu.uuid if q.gpu else None,
        "reason": q.reason,
        "event": q.event.public_id if q.event else None,
        "message": q.event.message if q.event else "",
        "started_at": q.started_at.isoformat(),
        "models_over_threshold": [{"model": m.model, "gpus": m.gpus, "out": m.quarantined} for m in over],
    }
    subject = f"[gpucloud] quarantined: {target} on {q.node.host_cluster.name} ({q.reason})"
    lines = [subject, "", message["message"]]
    lines += [
        f"{m.model}: {m.quarantined} of {m.gpus} GPUs out ({m.share:.0%}), above the alert share"
        for m in over
    ]
    _send(message, subject, "\n".join(lines))
    return message


def _send(message: dict[str, Any], subject: str, body: str) -> None:
    url = settings.HEALTH_ALERT_WEBHOOK_URL
    if url:
        request = urllib.request.Request(
            url,
            data=json.dumps(message).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=settings.BILLING_WEBHOOK_TIMEOUT):  # operator's URL
                pass
        except OSError as exc:
            log.warning("health webhook failed", extra={"url": url, "error": str(exc)})
    admins = get_user_model().objects.filter(is_staff=True, is_active=True).exclude(email="")
    recipients = sorted({*settings.HEALTH_ALERT_EMAILS, *admins.values_list("email", flat=True)})
    if recipients:
        sender = settings.BILLING_ALERT_EMAIL_FROM or settings.DEFAULT_FROM_EMAIL
        try:
            send_mail(subject, body, sender, recipients)
        except OSError as exc:
            log.warning("health e-mail failed", extra={"error": str(exc)})
