"""Ingest: parse (`billing.dcgm`) → attribute pods to tenants by host namespace → integrate with the persisted
per-node device state (`billing.metering`) → append ledger rows (`billing.services.ledger`), the scrape record
and the new state in one transaction. Health judges each round first (`health.services.observe.observe_dcgm`),
so no sample of a GPU it takes out is billed, and the tenants whose pods it held are credited. The scrape
record is unique per (host cluster, node, time), so the same scrape ingested twice adds nothing.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from billing import dcgm, dcgm_health, hami, metering
from billing.metrics import METER_ANOMALIES, METER_SCRAPES
from billing.models import (
    MICRO,
    HealthCredit,
    MeterState,
    ScrapeRecord,
    UnknownNode,
)
from billing.services import ledger
from fleet import catalog
from fleet.models import HostCluster, Node
from health.selectors import QuarantinedGpu
from health.services.observe import DcgmReading, observe_dcgm
from tenants.models import TenantCluster

log = logging.getLogger(__name__)
_parsers: dict[int, dcgm.Parser] = {}  # label sets rarely change between rounds: keep them per cluster


@dataclass(frozen=True)
class Failure:
    """A node that could not be collected this round (timeout, refused, HTTP error): why."""

    reason: str


@dataclass
class ClusterFacts:
    """What the cluster says about pods, beside DCGM: exact start/finish, known shares, known classes, and
    HAMi's allocations where the cluster runs HAMi (`billing.hami`: which pods share which GPU, how much)."""

    lifecycle: Mapping[metering.PodRef, metering.PodLifecycle] = field(default_factory=dict)
    unseen: Mapping[str, Sequence[metering.Unseen]] = field(default_factory=dict)  # by GPU UUID
    fractions: Mapping[metering.PodRef, float] = field(default_factory=dict)
    classes: Mapping[metering.PodRef, str] = field(default_factory=dict)
    hami_allocations: hami.Allocations | None = None


def ingest_scrape(
    host_cluster: HostCluster,
    node: str,
    at: datetime,
    text: str | bytes,
    *,
    source: str = ScrapeRecord.Source.FILE,
    facts: ClusterFacts | None = None,
) -> ScrapeRecord:
    """Ingest one node's exposition as scraped at `at`. Ingesting the same (node, at) again adds nothing."""
    return ingest_round(host_cluster, at, {node: text}, source=source, facts=facts)[node]


def ingest_round(
    host_cluster: HostCluster,
    at: datetime,
    payloads: Mapping[str, str | bytes | Failure],
    *,
    source: str = ScrapeRecord.Source.EXPORTER,
    facts: ClusterFacts | None = None,
) -> dict[str, ScrapeRecord]:
    """Ingest one collection round of many nodes in one transaction; returns each node's scrape record."""
    records = ingest_rounds(host_cluster, [(at, payloads)], source=source, facts=facts)
    return {node: record for (node, _), record in records.items()}


def ingest_rounds(
    host_cluster: HostCluster,
    rounds: Sequence[tuple[datetime, Mapping[str, str | bytes | Failure]]],
    *,
    source: str = ScrapeRecord.Source.EXPORTER,
    facts: ClusterFacts | None = None,
) -> dict[tuple[str, datetime], ScrapeRecord]:
    """Ingest rounds in time order in one transaction (collection, replay, backfill).

    Returns the scrape record of each (node, time); those already ingested are returned as they were and add
    nothing. Within one call the ledger cells of a node are summed and point at its last scrape.
    """
    facts = facts or ClusterFacts()
    nodes = sorted({node for _, payloads in rounds for node in payloads})
    with transaction.atomic():
        existing = {
            (r.node, r.at): r
            for r in ScrapeRecord.objects.filter(
                host_cluster=host_cluster, at__in=[at for at, _ in rounds], node__in=nodes
            )
        }
        writer = _RoundWriter(host_cluster, source, facts, _lock_states(host_cluster, nodes))
        for at, payloads in rounds:
            writer.ingest_at(at, {n: body for n, body in payloads.items() if (n, at) not in existing})
        records = writer.write()
        _report_unknown_nodes(host_cluster, records)
    transaction.on_commit(lambda: _count(host_cluster.name, source, records.values()))
    return {**existing, **records}


def _listed(result: dcgm.ParseResult) -> frozenset[tuple[str, int | None]]:
    """The GPUs an exposition lists, as (UUID, index)."""
    return frozenset(
        (k.uuid, int(r.gpu_index) if r.gpu_index.isdigit() else None) for k, r in result.devices.items()
    )


def _lock_states(host_cluster: HostCluster, nodes: Iterable[str]) -> dict[str, MeterState]:
    """The nodes' device states, locked: two collectors of one cluster never integrate the same interval."""
    nodes = list(nodes)
    MeterState.objects.bulk_create(
        [MeterState(host_cluster=host_cluster, node=n, state={}) for n in nodes], ignore_conflicts=True
    )
    rows = MeterState.objects.select_for_update().filter(host_cluster=host_cluster, node__in=nodes)
    return {row.node: row for row in rows}


class _RoundWriter:
    """Integrates each node's scrapes and collects the rows to write."""

    def __init__(
        self, host_cluster: HostCluster, source: str, facts: ClusterFacts, states: dict[str, MeterState]
    ) -> None:
        self.host_cluster, self.source, self.facts, self.states = host_cluster, source, facts, states
        self.parser = _parsers.setdefault(host_cluster.pk, dcgm.Parser())
        self.tenants = dict(
            TenantCluster.objects.filter(host_cluster=host_cluster).values_list("namespace", "tenant_id")
        )
        self.integrators: dict[str, metering.Integrator] = {}
        # The cluster's shares and classes, plus those HAMi's allocations give (filled per scrape).
        self.fractions, self.classes = dict(facts.fractions), dict(facts.classes)
        self.records: dict[tuple[str, datetime], ScrapeRecord] = {}
        self.last: dict[str, ScrapeRecord] = {}
        self.cells: dict[str, dict[tuple[metering.LedgerKey, str], metering.Usage]] = defaultdict(dict)
        self.health_states: dict[str, dict[str, Any]] = {}
        self.credits: list[HealthCredit] = []
        self.now = timezone.now()

    def _integrator(self, node: str) -> metering.Integrator:
        if node not in self.integrators:
            state, lifecycle, max_gap = self.states[node].state, self.facts.lifecycle, settings.METER_MAX_GAP
            unseen = self.facts.unseen
            self.integrators[node] = (
                metering.Integrator.from_state(state, max_gap=max_gap, lifecycle=lifecycle, unseen=unseen)
                if state
                else metering.Integrator(max_gap=max_gap, lifecycle=lifecycle, unseen=unseen)
            )
        return self.integrators[node]

    def ingest(self, node: str, at: datetime, body: str | bytes | Failure) -> None:
        self.ingest_at(at, {node: body})

    def ingest_at(self, at: datetime, payloads: Mapping[str, str | bytes | Failure]) -> None:
        """One round: parse every node, let health judge the round (it may take GPUs out), then integrate."""
        parsed: dict[str, tuple[str | bytes, dcgm.ParseResult]] = {}
        for node, body in payloads.items():
            record = ScrapeRecord(host_cluster=self.host_cluster, node=node, at=at, source=self.source)
            self.records[(node, at)] = record
            if isinstance(body, Failure):
                record.status, record.reason = ScrapeRecord.Status.FAILED, body.reason
                continue
            self.last[node] = record
            parsed[node] = (body, self.parser.parse(body, default_hostname=node))
        out = self._judge_health(at, parsed)
        for node, (_, result) in parsed.items():
            self._integrate(node, at, result, out)

    def _judge_health(
        self, at: datetime, parsed: Mapping[str, tuple[str | bytes, dcgm.ParseResult]]
    ) -> dict[str, QuarantinedGpu]:
        """The round's health signals, judged before any of its samples is billed (`health.services.observe`);
        the nodes' health memory is kept beside their metering state (`MeterState.health`)."""
        readings = [
            DcgmReading(node, _listed(result), dcgm_health.read(body))
            for node, (body, result) in parsed.items()
            if result.devices  # the exporter answered nothing usable: no GPU is "missing" from it
        ]
        memory = {r.node: self.states[r.node].health or {} for r in readings}
        verdict = observe_dcgm(self.host_cluster, at, readings, memory)
        self.health_states.update(verdict.memory)
        return verdict.quarantined

    def _integrate(
        self, node: str, at: datetime, result: dcgm.ParseResult, out: Mapping[str, QuarantinedGpu]
    ) -> None:
        record = self.records[(node, at)]
        integrator = self._integrator(node)
        self.states[node].memory = _memory(result)
        if self.facts.hami_allocations is not None:
            _add_hami_holders(result, self.facts.hami_allocations, self.fractions, self.classes)
            _remember_hami_classes(integrator, self.fractions, self.classes)
        samples = metering.samples_from_exposition(result, at.timestamp(), fractions=self.fractions)
        if out:  # no sample of a GPU out of service is billed from the moment it went out
            samples = [(k, s) for k, s in samples if k.uuid not in out or s.t < out[k.uuid].since.timestamp()]
        shared = _shared_pods(integrator, samples, self.classes)
        integrator.ingest_round(samples)
        drained = integrator.drain()
        _describe(record, result, samples, drained)
        if out:
            self._credits(node, integrator, out)
        cells = self.cells[node]
        for key, usage in drained.ledger.items():
            cell_key = (key, _billed_class(key, shared, self.classes))
            cell = cells.get(cell_key)
            if cell is None:
                cells[cell_key] = metering.Usage(usage.gpu_seconds, usage.util_gpu_seconds, usage.joules)
            else:
                cell.gpu_seconds += usage.gpu_seconds
                cell.util_gpu_seconds += usage.util_gpu_seconds
                cell.joules += usage.joules

    def _credits(self, node: str, integrator: metering.Integrator, out: Mapping[str, QuarantinedGpu]) -> None:
        """Credits for the pods a GPU's fault caught: from the device's last clean sample (the integrator
        keeps it, as no later sample was taken) to the pod's end when the cluster knows it, else to the
        quarantine; capped. The unique row makes a retried or replayed round add none."""
        cap = timedelta(hours=settings.HEALTH_CREDIT_MAX_HOURS)
        for key, sample in integrator.last.items():
            gone = out.get(key.uuid)
            if (
                gone is None
                or gone.event_id is None
                or not sample.holders
                or sample.t >= gone.since.timestamp()
            ):
                continue
            lost_from = datetime.fromtimestamp(sample.t, UTC)
            for holding in sample.holders:
                ref = (holding.namespace, holding.pod)
                tenant_id = self.tenants.get(holding.namespace)
                if tenant_id is None:
                    continue
                finish = self.facts.lifecycle.get(ref, metering.PodLifecycle()).finish
                end = datetime.fromtimestamp(finish, UTC) if finish is not None else gone.since
                lost_until = max(lost_from, min(end, lost_from + cap))
                share = holding.fraction if holding.fraction is not None else 1 / len(sample.holders)
                shared = share < 1 and key.gpu_instance is None
                gi = key.gpu_instance
                self.credits.append(
                    HealthCredit(
                        tenant_id=tenant_id,
                        event_id=gone.event_id,
                        host_cluster=self.host_cluster,
                        node=node,
                        gpu_uuid=key.uuid,
                        device=key.uuid if gi is None else f"{key.uuid}/{gi}",
                        namespace=holding.namespace,
                        pod=holding.pod,
                        gpu_class=self.classes.get(ref) or class_name(sample.gpu_class, shared),
                        lost_from=lost_from,
                        lost_until=lost_until,
                        gpu_us=round((lost_until - lost_from).total_seconds() * share * MICRO),
                    )
                )

    def _row(
        self, node: str, key: metering.LedgerKey, gpu_class: str, usage: metering.Usage
    ) -> tuple[Any, ...]:
        """One ledger row as a tuple laid out as `ledger.LEDGER_COLUMNS` (no model instance: 14,000 of them a
        round)."""
        gi = key.device.gpu_instance
        return (
            self.last[node].pk,
            self.host_cluster.pk,
            self.tenants.get(key.namespace) if key.namespace else None,
            gpu_class,
            node,
            key.device.uuid if gi is None else f"{key.device.uuid}/{gi}",
            key.namespace,
            key.pod,
            datetime.fromtimestamp(key.hour, UTC),
            round(usage.gpu_seconds * MICRO),
            round(usage.util_gpu_seconds * MICRO),
            round(usage.joules * 1000),
            self.now,
        )

    def write(self) -> dict[tuple[str, datetime], ScrapeRecord]:
        ScrapeRecord.objects.bulk_create(self.records.values(), batch_size=2000)
        rows = [
            self._row(node, key, gpu_class, usage)
            for node, cells in self.cells.items()
            for (key, gpu_class), usage in cells.items()
        ]
        ledger.append(rows)
        ledger.add_to_hours([r.pk for r in self.last.values()], rows)
        for node, integrator in self.integrators.items():
            self.states[node].state = integrator.state()
        ledger.save_states([self.states[node] for node in self.integrators])
        for node, state in self.health_states.items():
            MeterState.objects.filter(pk=self.states[node].pk).update(health=state)
        HealthCredit.objects.bulk_create(self.credits, ignore_conflicts=True)
        return self.records


def _memory(result: dcgm.ParseResult) -> dict[str, float]:
    """Framebuffer used per device of the scrape, MiB, keyed as `MeterState.memory` says."""
    return {
        key.uuid if key.gpu_instance is None else f"{key.uuid}/{key.gpu_instance}": record.fb_used_mib
        for key, record in result.devices.items()
        if record.fb_used_mib is not None
    }


def _add_hami_holders(
    result: dcgm.ParseResult,
    allocations: hami.Allocations,
    fractions: dict[metering.PodRef, float],
    classes: dict[metering.PodRef, str],
) -> None:
    """Put the pods HAMi allocated on each whole GPU of the exposition on its record, with their shares.

    A pod whose memory is one of the catalog's HAMi fractions of the device's model (`h200-141gb.hami-25`
    asks for 25 % of 141 GiB, `fleet.catalog.hami_resources`) is billed by that declared fraction under
    that class; any other allocation by its measured share of the device's memory, as a `.shared` GPU.
    Devices are matched by UUID, which HAMi and DCGM both report; the shares of one GPU never add up to more
    than the whole GPU (`metering.split_shares` scales them down).
    """
    for key, record in result.devices.items():
        pods = allocations.pods.get(key.uuid)
        if key.gpu_instance is not None or not pods:
            continue
        model = catalog.model_for_dcgm_name(record.model)
        nominal = model.memory_gb * 2**30 if model is not None else 0.0
        device = allocations.memory_bytes.get(key.uuid) or nominal
        present = {(h.namespace, h.pod) for h in record.holders}
        for pod in pods:
            ref = (pod.namespace, pod.pod)
            if ref not in present:
                record.holders.append(dcgm.Holder(pod.namespace, pod.pod, ""))
                present.add(ref)
            percent = _declared_percent(pod.memory_bytes, nominal, device)
            if model is not None and percent:
                fractions[ref] = percent / 100
                classes[ref] = f"{model.slug}.hami-{percent}"
            elif device:
                fractions[ref] = min(1.0, pod.memory_bytes / device)


def _declared_percent(memory: float, nominal: float, device: float) -> int:
    """The catalog HAMi percent an allocation is, against the model's memory or the memory HAMi manages on
    the device (`gpumem-percentage` asks for a share of the latter); 0 when it is none of them."""
    for percent in catalog.HAMI_PERCENTS:
        for whole in (nominal, device):
            if whole and abs(memory / whole - percent / 100) <= 0.005:
                return percent
    return 0


def _remember_hami_classes(
    integrator: metering.Integrator,
    fractions: dict[metering.PodRef, float],
    classes: dict[metering.PodRef, str],
) -> None:
    """A HAMi pod gone since the device's last sample is no longer in HAMi's metrics, but the trailing half of
    its last interval is still billed: its class follows from the declared fraction kept in the state."""
    for key, sample in integrator.last.items():
        if key.gpu_instance is not None:
            continue
        model = None
        for h in sample.holders:
            ref = (h.namespace, h.pod)
            if ref in classes or h.fraction is None:
                continue
            model = model or catalog.model_for_dcgm_name(sample.gpu_class[0])
            percent = round(h.fraction * 100)
            if (
                model is not None
                and percent in catalog.HAMI_PERCENTS
                and abs(h.fraction * 100 - percent) < 1e-6
            ):
                classes[ref] = f"{model.slug}.hami-{percent}"
                fractions.setdefault(ref, h.fraction)


def _shared_pods(
    integrator: metering.Integrator,
    samples: list[tuple[dcgm.DeviceKey, metering.Sample]],
    classes: Mapping[metering.PodRef, str],
) -> set[metering.PodRef]:
    """Pods holding a share of a whole GPU, before or at this round: billed as the model's `.shared` class.

    The cluster's word wins; otherwise a pod is shared when it holds a known fraction below 1 or sits on a
    GPU beside other pods.
    """
    shared = set()
    for key, sample in [*samples, *integrator.last.items()]:
        if key.gpu_instance is not None:
            continue
        for h in sample.holders:
            ref = (h.namespace, h.pod)
            known = classes.get(ref)
            if known is not None:
                if known.endswith(".shared"):
                    shared.add(ref)
            elif len(sample.holders) > 1 or (h.fraction is not None and h.fraction < 1):
                shared.add(ref)
    return shared


def _billed_class(
    key: metering.LedgerKey, shared: set[metering.PodRef], classes: Mapping[metering.PodRef, str]
) -> str:
    """The class a ledger key is billed as: from DCGM's model and MIG profile, except that a HAMi fraction the
    cluster names for the pod (`h100-80gb.hami-25`, metered by its declared fraction) keeps its name."""
    ref = (key.namespace, key.pod)
    known = classes.get(ref, "")
    # A share DCGM never saw (rule 3b) is in no sample, so only the cluster's word says it was shared.
    name = class_name(key.gpu_class, ref in shared or known.endswith(".shared"))
    if (
        key.device.gpu_instance is None
        and catalog.hami_percent(known)
        and known.split(".")[0] == name.split(".")[0]
    ):
        return known
    return name


def class_name(gpu_class: metering.GpuClassInput, shared: bool = False) -> str:
    """The catalog GPU class of a (modelName, MIG profile): `h100-80gb`, `h100-80gb.mig-1g.10gb`, …."""
    model_name, profile = gpu_class
    model = catalog.model_for_dcgm_name(model_name)
    if model is None:
        return f"unknown:{model_name}"[:80]
    if profile:
        return f"{model.slug}.mig-{profile}"
    return f"{model.slug}.shared" if shared else model.slug


def _describe(
    record: ScrapeRecord,
    result: dcgm.ParseResult,
    samples: list[tuple[dcgm.DeviceKey, metering.Sample]],
    out: metering.Contributions,
) -> None:
    """Fill the scrape record: counts, status and a reason a person can act on."""
    record.devices, record.samples = len(samples), result.samples
    record.garbled, record.late = len(result.bad_lines), len(out.late)
    record.duplicates, record.gaps = out.duplicates, len(out.gaps)
    reasons = [f"line {b.lineno}: {b.reason}" for b in result.bad_lines[:5]]
    if len(result.bad_lines) > 5:
        reasons.append(f"… and {len(result.bad_lines) - 5} more garbled lines")
    if out.late:
        reasons.append(f"{len(out.late)} late samples (device already integrated until a later time)")
    if out.gaps:
        reasons.append(f"{len(out.gaps)} gaps longer than METER_MAX_GAP not billed")
    if not samples:
        record.status = ScrapeRecord.Status.FAILED
        reasons.insert(0, "no DCGM device samples in the exposition")
    elif result.bad_lines:
        record.status = ScrapeRecord.Status.PARTIAL
    else:
        record.status = ScrapeRecord.Status.OK
    record.reason = "; ".join(reasons)


def _report_unknown_nodes(host_cluster: HostCluster, seen: Iterable[tuple[str, datetime]]) -> None:
    """Nodes the fleet does not know are billed all the same, and reported here."""
    times: dict[str, list[datetime]] = defaultdict(list)
    for node, at in seen:
        times[node].append(at)
    known = set(Node.objects.filter(host_cluster=host_cluster, name__in=times).values_list("name", flat=True))
    unknown = sorted(set(times) - known)
    if not unknown:
        return
    reports = {r.name: r for r in UnknownNode.objects.filter(host_cluster=host_cluster, name__in=unknown)}
    new = []
    for name in unknown:
        first, last, count = min(times[name]), max(times[name]), len(times[name])
        report = reports.get(name)
        if report is None:
            new.append(
                UnknownNode(
                    host_cluster=host_cluster, name=name, first_seen=first, last_seen=last, scrapes=count
                )
            )
            continue
        report.first_seen, report.last_seen = min(report.first_seen, first), max(report.last_seen, last)
        report.scrapes += count
    UnknownNode.objects.bulk_create(new, batch_size=1000)
    UnknownNode.objects.bulk_update(reports.values(), ["first_seen", "last_seen", "scrapes"], batch_size=1000)
    if new:
        log.warning("samples from nodes the fleet does not know", extra={"nodes": [n.name for n in new][:20]})


def _count(cluster: str, source: str, records: Iterable[ScrapeRecord]) -> None:
    for r in records:
        METER_SCRAPES.labels(cluster, source, r.status).inc()
        for kind in ("garbled", "late", "duplicates", "gaps"):
            if getattr(r, kind):
                METER_ANOMALIES.labels(cluster, kind).inc(getattr(r, kind))
