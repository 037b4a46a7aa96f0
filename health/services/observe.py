"""Observe: events from DCGM rounds and node conditions, and the quarantines the fatal ones lead to.

The one writer of `HealthEvent` rows. Metering calls `observe_dcgm` inside its collection round, before it
integrates the round, so a fatal reading takes the GPU out (and out of billing) in the very round that showed
it; the health pass (`health.node_pass`) calls `observe_nodes` with the node conditions its driver lists.
Taking out and bringing back is `health.services.quarantines`; the rules are `fleet.health_rules`;
`docs/health.md` says it all in prose.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction

from core import audit
from fleet.health_rules import (
    COUNTERS,
    DCGM_SIGNALS,
    FATAL,
    Finding,
    Rules,
    condition_source,
    gpu_findings,
    node_findings,
)
from fleet.models import Gpu, HostCluster, Node, placeholder_uuid
from health.models import HealthEvent, Quarantine
from health.selectors import QuarantinedGpu, quarantined_by_uuid
from health.services.quarantines import SYSTEM, quarantine, release_clean

log = logging.getLogger(__name__)


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


@dataclass(frozen=True)
class DcgmReading:
    """One node's DCGM scrape in a round as health reads it: the GPUs it listed as (UUID, index) and their
    health fields by UUID (`billing.dcgm_health` reads them from the exposition)."""

    node: str
    seen: frozenset[tuple[str, int | None]]
    fields: Mapping[str, Mapping[str, float]] = field(default_factory=dict)


@dataclass(frozen=True)
class DcgmVerdict:
    """What judging a round gave: every GPU of the host cluster quarantined now, by UUID, and per node the
    memory to keep for its next scrape (`memory`, only for the nodes where it changed)."""

    quarantined: dict[str, QuarantinedGpu]
    memory: dict[str, dict[str, Any]]


def observe_dcgm(
    host_cluster: HostCluster,
    at: datetime,
    readings: Sequence[DcgmReading],
    memory: Mapping[str, Mapping[str, Any]],
) -> DcgmVerdict:
    """Judge one collection round (`observe_round`) from the nodes' readings and what was remembered of each
    node's previous scrape: its nonzero counters, the GPUs it listed and those missing since. The caller
    keeps that memory (metering stores it beside the node's metering state, `MeterState.health`) and writes
    back what the verdict gives. Runs in the caller's transaction."""
    scrapes = []
    remembered = {}
    for reading in readings:
        scrape, after = _scrape(reading, at, memory.get(reading.node) or {})
        scrapes.append(scrape)
        if after is not None:
            remembered[reading.node] = after
    return DcgmVerdict(observe_round(host_cluster, at, scrapes), remembered)


def _scrape(
    reading: DcgmReading, at: datetime, before: Mapping[str, Any]
) -> tuple[NodeScrape, dict[str, Any] | None]:
    """The scrape to judge, and the node's memory after it (None when unchanged)."""
    elapsed = at.timestamp() - before["at"] if before.get("at") is not None else None
    counters = {u: {f: v for f, v in fs.items() if f in COUNTERS and v} for u, fs in reading.fields.items()}
    listed = {uuid for uuid, _ in reading.seen}
    # The GPUs this scrape should list: those of the previous scrape a round ago (not after a gap, when
    # anything may have changed on the node), and those found missing before and not back yet.
    expected = None
    if "listed" in before:
        consecutive = elapsed is not None and elapsed <= settings.METER_MAX_GAP
        expected = set(before.get("missing", ())) | (set(before["listed"]) if consecutive else set())
    missing = sorted((expected or set()) - listed)
    after = {
        "at": at.timestamp(),
        "gpus": {u: c for u, c in counters.items() if c},
        "listed": sorted(listed),
        "missing": missing,
    }
    changed = (
        after["gpus"]
        or before.get("gpus")
        or after["listed"] != before.get("listed")
        or missing != before.get("missing", [])
    )
    previous = before.get("gpus", {})
    scrape = NodeScrape(reading.node, reading.seen, reading.fields, previous, elapsed, expected)
    return scrape, after if changed else None  # unchanged zeros and the same GPUs cost no write


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
            found.extend(
                (gpu.node, gpu, finding) for finding in gpu_findings(fields, previous, scrape.elapsed, judge)
            )
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
