"""Every write of billing goes through here: ingesting scrapes, rate cards, invoices and budgets.

Ingest: parse (`billing.dcgm`) → attribute pods to tenants by host namespace → integrate with the persisted
per-node device state (`billing.metering`) → append ledger rows, the scrape record and the new state in one
transaction. The scrape record is unique per (host cluster, node, time), so the same scrape ingested twice
adds nothing.
"""

from __future__ import annotations

import calendar
import json
import logging
import urllib.request
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from fractions import Fraction
from typing import Any

from django.conf import settings
from django.core.mail import send_mail
from django.db import connection, transaction
from django.db.models import F, Max, Sum
from django.utils import timezone

from billing import dcgm, metering
from billing.metrics import METER_ANOMALIES, METER_SCRAPES
from billing.models import (
    MICRO,
    Budget,
    BudgetAlert,
    Invoice,
    InvoiceLine,
    MeterState,
    RateCard,
    ScrapeRecord,
    UnknownNode,
    UsageEntry,
    UsageHour,
)
from gpucloud.errors import Conflict, PermissionDenied, ValidationFailed
from scheduling import catalog
from scheduling.models import HostCluster, Node
from tenants import audit
from tenants.audit import Actor
from tenants.models import Tenant, TenantCluster
from tenants.services import require, suspend_tenant

log = logging.getLogger(__name__)
CENT = Decimal("0.01")
HOUR = Decimal(3600)
THRESHOLDS = (50, 80, 100)
_parsers: dict[int, dcgm.Parser] = {}  # label sets rarely change between rounds: keep them per cluster


# --- Ingest ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Failure:
    """A node that could not be collected this round (timeout, refused, HTTP error): why."""

    reason: str


@dataclass
class ClusterFacts:
    """What the cluster says about pods, beside DCGM: exact start/finish, known shares, known classes."""

    lifecycle: Mapping[metering.PodRef, metering.PodLifecycle] = field(default_factory=dict)
    fractions: Mapping[metering.PodRef, float] = field(default_factory=dict)
    classes: Mapping[metering.PodRef, str] = field(default_factory=dict)


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
            for node, body in payloads.items():
                if (node, at) not in existing:
                    writer.ingest(node, at, body)
        records = writer.write()
        _report_unknown_nodes(host_cluster, records)
    transaction.on_commit(lambda: _count(host_cluster.name, source, records.values()))
    return {**existing, **records}


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
        self.records: dict[tuple[str, datetime], ScrapeRecord] = {}
        self.last: dict[str, ScrapeRecord] = {}
        self.cells: dict[str, dict[tuple[metering.LedgerKey, str], metering.Usage]] = defaultdict(dict)
        self.now = timezone.now()

    def _integrator(self, node: str) -> metering.Integrator:
        if node not in self.integrators:
            state, lifecycle, max_gap = self.states[node].state, self.facts.lifecycle, settings.METER_MAX_GAP
            self.integrators[node] = (
                metering.Integrator.from_state(state, max_gap=max_gap, lifecycle=lifecycle)
                if state
                else metering.Integrator(max_gap=max_gap, lifecycle=lifecycle)
            )
        return self.integrators[node]

    def ingest(self, node: str, at: datetime, body: str | bytes | Failure) -> None:
        record = ScrapeRecord(host_cluster=self.host_cluster, node=node, at=at, source=self.source)
        self.records[(node, at)] = record
        if isinstance(body, Failure):
            record.status, record.reason = ScrapeRecord.Status.FAILED, body.reason
            return
        self.last[node] = record
        result = self.parser.parse(body, default_hostname=node)
        samples = metering.samples_from_exposition(result, at.timestamp(), fractions=self.facts.fractions)
        integrator = self._integrator(node)
        shared = _shared_pods(integrator, samples, self.facts.classes)
        integrator.ingest_round(samples)
        out = integrator.drain()
        _describe(record, result, samples, out)
        cells = self.cells[node]
        for key, usage in out.ledger.items():
            cell_key = (key, class_name(key.gpu_class, (key.namespace, key.pod) in shared))
            cell = cells.get(cell_key)
            if cell is None:
                cells[cell_key] = metering.Usage(usage.gpu_seconds, usage.util_gpu_seconds, usage.joules)
            else:
                cell.gpu_seconds += usage.gpu_seconds
                cell.util_gpu_seconds += usage.util_gpu_seconds
                cell.joules += usage.joules

    def _row(
        self, node: str, key: metering.LedgerKey, gpu_class: str, usage: metering.Usage
    ) -> tuple[Any, ...]:
        """One ledger row as a tuple laid out as LEDGER_COLUMNS (no model instance: 14,000 per round)."""
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
        _append_ledger(rows)
        _add_to_hours([r.pk for r in self.last.values()], rows)
        for node, integrator in self.integrators.items():
            self.states[node].state = integrator.state()
        _save_states([self.states[node] for node in self.integrators])
        return self.records


LEDGER_COLUMNS = (
    "scrape_id", "host_cluster_id", "tenant_id", "gpu_class", "node", "device", "namespace", "pod", "hour",
    "gpu_us", "util_gpu_us", "millijoules", "recorded_at",
)  # fmt: skip


def _append_ledger(rows: list[tuple[Any, ...]]) -> None:
    """Append ledger rows laid out as LEDGER_COLUMNS. On PostgreSQL with COPY: Django's model instances and
    per-field preparation in bulk_create cost more than parsing the round."""
    if connection.vendor != "postgresql":
        UsageEntry.objects.bulk_create(
            [UsageEntry(**dict(zip(LEDGER_COLUMNS, row, strict=True))) for row in rows], batch_size=5000
        )
        return
    columns = ", ".join(LEDGER_COLUMNS)
    with (
        connection.cursor() as cursor,
        cursor.cursor.copy(f"COPY {UsageEntry._meta.db_table} ({columns}) FROM STDIN") as copy,
    ):
        for row in rows:
            copy.write_row(row)


HOUR_KEY = ("host_cluster_id", "node", "device", "namespace", "pod", "gpu_class", "hour")
HOUR_SUMS = ("gpu_us", "util_gpu_us", "millijoules")


def _add_to_hours(scrape_ids: list[int], rows: list[tuple[Any, ...]]) -> None:
    """Add this call's ledger rows to the hourly sums: on PostgreSQL one INSERT … ON CONFLICT DO UPDATE."""
    if not rows:
        return
    if connection.vendor != "postgresql":
        _add_to_hours_slowly(rows)
        return
    key, sums = ", ".join(HOUR_KEY), ", ".join(HOUR_SUMS)
    added = ", ".join(f"{c} = h.{c} + EXCLUDED.{c}" for c in HOUR_SUMS)
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {UsageHour._meta.db_table} AS h ({key}, tenant_id, {sums}) "
            f"SELECT {key}, max(tenant_id), {', '.join(f'sum({c})' for c in HOUR_SUMS)} "
            f"FROM {UsageEntry._meta.db_table} WHERE scrape_id = ANY(%s) GROUP BY {key} "
            f"ON CONFLICT ({key}) DO UPDATE SET {added}",
            [scrape_ids],
        )


def _add_to_hours_slowly(rows: list[tuple[Any, ...]]) -> None:
    """The same for SQLite (the embedded default, small fleets): one upsert per cell."""
    position = {c: i for i, c in enumerate(LEDGER_COLUMNS)}
    for row in rows:
        key = {c: row[position[c]] for c in HOUR_KEY}
        values = {c: row[position[c]] for c in HOUR_SUMS}
        updated = UsageHour.objects.filter(**key).update(**{c: F(c) + v for c, v in values.items()})
        if not updated:
            UsageHour.objects.create(tenant_id=row[position["tenant_id"]], **key, **values)


def _save_states(states: list[MeterState]) -> None:
    """Write the nodes' new states. On PostgreSQL one UPDATE … FROM (VALUES …) per thousand nodes: Django's
    bulk_update builds a CASE per row and took most of a 10,000-GPU round."""
    if connection.vendor != "postgresql":
        MeterState.objects.bulk_update(states, ["state"], batch_size=500)
        return
    table = MeterState._meta.db_table
    with connection.cursor() as cursor:
        for i in range(0, len(states), 1000):
            batch = states[i : i + 1000]
            values = ", ".join(["(%s, %s::jsonb)"] * len(batch))
            params: list[Any] = []
            for row in batch:
                params += [row.pk, json.dumps(row.state)]
            cursor.execute(
                f"UPDATE {table} AS m SET state = v.state, updated_at = now() "
                f"FROM (VALUES {values}) AS v(id, state) WHERE m.id = v.id",
                params,
            )


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


# --- Rate cards ------------------------------------------------------------------------------------------


def _decimal(value: Any, where: str) -> Decimal:
    try:
        number = Decimal(str(value))
    except InvalidOperation:
        raise ValidationFailed.on(where, f"{value!r} is not a decimal number") from None
    if not number.is_finite() or number < 0:
        raise ValidationFailed.on(where, f"{value!r} must be a finite number of at least 0")
    return number


def _validate_prices(prices: Mapping[str, Any], tiers: Mapping[str, Any]) -> None:
    if not prices:
        raise ValidationFailed.on(
            "prices", "a rate card needs at least one price: {gpu class: price per GPU-hour}"
        )
    known = {c.name for c in catalog.all_classes()}
    for name, price in prices.items():
        if name not in known:
            raise ValidationFailed.on(
                f"prices.{name}",
                f"{name!r} is not a GPU class; classes look like h100-80gb, "
                "h100-80gb.mig-1g.10gb or h100-80gb.shared",
            )
        _decimal(price, f"prices.{name}")
    for tier, multiplier in tiers.items():
        if tier not in Tenant.TrustTier.values:
            raise ValidationFailed.on(
                f"tier_multipliers.{tier}",
                f"{tier!r} is not a trust tier: {', '.join(Tenant.TrustTier.values)}",
            )
        _decimal(multiplier, f"tier_multipliers.{tier}")


@transaction.atomic
def create_rate_card(
    *,
    actor: Actor,
    effective_from: datetime,
    prices: Mapping[str, Any],
    currency: str = "USD",
    tier_multipliers: Mapping[str, Any] | None = None,
    note: str = "",
) -> RateCard:
    """A new rate card version, in force from `effective_from`. Platform administrators only.

    Cards are never edited: a price change is a new version. Issued invoices keep the prices they had.
    """
    if not actor.is_platform_admin:
        raise PermissionDenied("rate cards are written by platform administrators only")
    tiers = dict(tier_multipliers or {})
    _validate_prices(prices, tiers)
    if len(currency) != 3 or not currency.isalpha():
        raise ValidationFailed.on("currency", f"{currency!r} is not an ISO 4217 code such as USD or EUR")
    version = (RateCard.objects.select_for_update().aggregate(v=Max("version"))["v"] or 0) + 1
    card = RateCard.objects.create(
        version=version,
        currency=currency.upper(),
        effective_from=effective_from,
        prices={k: str(_decimal(v, k)) for k, v in prices.items()},
        tier_multipliers={k: str(_decimal(v, k)) for k, v in tiers.items()},
        note=note,
    )
    audit.record(
        actor,
        "rate_card.create",
        object_type="rate_card",
        object_id=card.public_id,
        after={
            "version": version,
            "effective_from": effective_from.isoformat(),
            "prices": card.prices,
            "tier_multipliers": card.tier_multipliers,
            "currency": card.currency,
        },
    )
    return card


def price_of(card: RateCard, gpu_class: str) -> Decimal | None:
    """Price per GPU-hour of a class on a card: its own, else derived from its model's whole-GPU price."""
    if gpu_class in card.prices:
        return Decimal(card.prices[gpu_class])
    model_slug, _, rest = gpu_class.partition(".")
    whole = card.prices.get(model_slug)
    if whole is None:
        return None
    if rest == "shared":
        return Decimal(whole)  # a share's usage is already its fraction of a GPU
    if rest.startswith("mig-"):
        fraction = _mig_fraction(model_slug, rest.removeprefix("mig-"))
        return None if fraction is None else Decimal(whole) * fraction.numerator / fraction.denominator
    return None


def _mig_fraction(model_slug: str, profile: str) -> Fraction | None:
    model = catalog.model_by_slug(model_slug)
    spec = next((p for p in model.mig_profiles if p.name == profile), None) if model else None
    return Fraction(spec.compute_slices, catalog.COMPUTE_SLICES) if spec else None


def multiplier_of(card: RateCard, tier: str) -> Decimal:
    return Decimal(card.tier_multipliers.get(tier, "1"))


def _cards_in_force(start: datetime, end: datetime) -> list[RateCard]:
    """Cards that apply somewhere in [start, end), oldest first."""
    cards = list(RateCard.objects.filter(effective_from__lt=end).order_by("effective_from", "version"))
    before = [c for c in cards if c.effective_from <= start]
    return ([before[-1]] if before else []) + [c for c in cards if c.effective_from > start]


def _card_at(cards: list[RateCard], moment: datetime) -> RateCard | None:
    current = None
    for card in cards:
        if card.effective_from <= moment:
            current = card
    return current


# --- Invoices --------------------------------------------------------------------------------------------


FIRST_MONTH, LAST_MONTH = (2000, 1), (2999, 12)  # the months an invoice can be for


def month_bounds(year: int, month: int) -> tuple[datetime, datetime]:
    """The first moment of the month and of the next one; refuses months outside FIRST_MONTH…LAST_MONTH
    (Python's dates end in 9999, and no usage was ever metered before 2000)."""
    if not (FIRST_MONTH <= (year, month) <= LAST_MONTH and 1 <= month <= 12):
        first, last = (f"{y:04d}-{m:02d}" for y, m in (FIRST_MONTH, LAST_MONTH))
        raise ValidationFailed.on(
            "month", f"{year:04d}-{month:02d} is not a month from {first} to {last} (YYYY-MM)"
        )
    start = datetime(year, month, 1, tzinfo=UTC)
    return start, start + timedelta(days=calendar.monthrange(year, month)[1])


@dataclass
class _Charge:
    gpu_class: str
    card: RateCard | None
    start: datetime
    end: datetime
    gpu_us: int = 0


def rate(tenant: Tenant, rows: Iterable[tuple[str, datetime, int]], kind: str) -> list[InvoiceLine]:
    """Rate ledger sums (class, hour, micro GPU-seconds) into lines: one per class per card in force."""
    rows = list(rows)
    if not rows:
        return []
    hours = [hour for _, hour, _ in rows]
    cards = _cards_in_force(min(hours), max(hours) + timedelta(hours=1))
    charges: dict[tuple[str, int | None], _Charge] = {}
    for gpu_class, hour, gpu_us in rows:
        card = _card_at(cards, hour)
        key = (gpu_class, card.version if card else None)
        charge = charges.setdefault(key, _Charge(gpu_class, card, hour, hour + timedelta(hours=1)))
        charge.start, charge.end = min(charge.start, hour), max(charge.end, hour + timedelta(hours=1))
        charge.gpu_us += gpu_us
    return [
        _line(tenant, c, kind) for _, c in sorted(charges.items(), key=lambda kv: (kv[0][0], kv[1].start))
    ]


def _line(tenant: Tenant, charge: _Charge, kind: str) -> InvoiceLine:
    gpu_hours = Decimal(charge.gpu_us) / MICRO / HOUR
    card = charge.card
    list_price = price_of(card, charge.gpu_class) if card else None
    unpriced = list_price is None
    list_price = list_price or Decimal(0)
    unit_price = list_price * (multiplier_of(card, tenant.trust_tier) if card else Decimal(1))
    what = "late usage of earlier months" if kind == InvoiceLine.Kind.ADJUSTMENT else "usage"
    price_note = "no price on the rate card" if unpriced else f"rate card v{card.version}" if card else ""
    return InvoiceLine(
        kind=kind,
        gpu_class=charge.gpu_class,
        description=f"{charge.gpu_class} {what}, {price_note}".rstrip(", "),
        charge_start=charge.start,
        charge_end=charge.end,
        gpu_hours=gpu_hours.quantize(Decimal("0.000001"), ROUND_HALF_UP),
        list_unit_price=list_price.quantize(Decimal("0.000001"), ROUND_HALF_UP),
        unit_price=unit_price.quantize(Decimal("0.000001"), ROUND_HALF_UP),
        list_amount=(gpu_hours * list_price).quantize(CENT, ROUND_HALF_UP),
        amount=(gpu_hours * unit_price).quantize(CENT, ROUND_HALF_UP),
        currency=card.currency if card else "USD",
        rate_card_version=card.version if card else None,
    )


def _usage_by_class_hour(tenant: Tenant, **filters: Any) -> list[tuple[str, datetime, int]]:
    rows = (
        UsageEntry.objects.filter(tenant=tenant, **filters)
        .values("gpu_class", "hour")
        .annotate(gpu_us=Sum("gpu_us"))
        .order_by("gpu_class", "hour")
    )
    return [(r["gpu_class"], r["hour"], r["gpu_us"]) for r in rows]


def _issued_watermark(tenant: Tenant) -> int:
    return (
        Invoice.objects.filter(tenant=tenant, state=Invoice.State.ISSUED).aggregate(
            w=Max("ledger_watermark")
        )["w"]
        or 0
    )


def _lines_for(invoice: Invoice, watermark: int) -> list[InvoiceLine]:
    """Usage of the month up to the watermark, and late usage of issued months not billed yet."""
    tenant = invoice.tenant
    usage = _usage_by_class_hour(
        tenant, hour__gte=invoice.period_start, hour__lt=invoice.period_end, id__lte=watermark
    )
    issued_periods = Invoice.objects.filter(
        tenant=tenant, state=Invoice.State.ISSUED, period_start__lt=invoice.period_start
    ).values_list("period_start", "period_end")
    late: list[tuple[str, datetime, int]] = []
    for start, end in issued_periods:
        late += _usage_by_class_hour(
            tenant, hour__gte=start, hour__lt=end, id__gt=_issued_watermark(tenant), id__lte=watermark
        )
    lines = rate(tenant, usage, InvoiceLine.Kind.USAGE) + rate(tenant, late, InvoiceLine.Kind.ADJUSTMENT)
    currencies = {line.currency for line in lines}
    if len(currencies) > 1:
        raise Conflict(
            f"the rate cards of this month use several currencies ({', '.join(sorted(currencies))})"
        )
    return lines


def _ledger_head(*, settled: bool = False) -> int:
    """The last ledger row; with `settled`, once every ingest in flight has committed (for an issue).

    Row ids are taken before commit, so without the lock a row with a smaller id could commit after the
    watermark was read and fall between the invoice and its adjustment. SHARE mode waits for the writers in
    flight and holds new ones back until this transaction ends (an issue is a short transaction).
    """
    if settled and connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(f"LOCK TABLE {UsageEntry._meta.db_table} IN SHARE MODE")
    return UsageEntry.objects.aggregate(m=Max("id"))["m"] or 0


def _fill(invoice: Invoice, watermark: int) -> Invoice:
    lines = _lines_for(invoice, watermark)
    invoice.lines.all().delete()
    for line in lines:
        line.invoice = invoice
    InvoiceLine.objects.bulk_create(lines)
    invoice.total = sum((line.amount for line in lines), Decimal(0))
    invoice.currency = lines[0].currency if lines else invoice.currency
    invoice.trust_tier = invoice.tenant.trust_tier
    invoice.ledger_watermark = watermark
    invoice.save()
    return invoice


@transaction.atomic
def draft_invoice(*, actor: Actor, tenant: Tenant, year: int, month: int) -> Invoice:
    """The tenant's invoice for a month, recomputed from the ledger while it is a draft."""
    require(actor, tenant, "billing.view", "reading invoices")
    start, end = month_bounds(year, month)
    invoice, _ = Invoice.objects.select_for_update().get_or_create(
        tenant=tenant, period_start=start, defaults={"period_end": end, "trust_tier": tenant.trust_tier}
    )
    if invoice.state == Invoice.State.ISSUED:
        return invoice
    return _fill(invoice, _ledger_head())


@transaction.atomic
def issue_invoice(*, actor: Actor, invoice: Invoice) -> Invoice:
    """Freeze a draft: recompute it from the ledger one last time and mark it issued. Platform admins only.

    Usage of this month written afterwards is late and goes on the tenant's next invoice as an adjustment.
    Invoices are issued month by month: an earlier draft must be issued first.
    """
    if not actor.is_platform_admin:
        raise PermissionDenied("invoices are issued by platform administrators only")
    invoice = Invoice.objects.select_for_update().select_related("tenant").get(pk=invoice.pk)
    if invoice.state == Invoice.State.ISSUED:
        raise Conflict(f"invoice {invoice.public_id} is already issued and cannot change")
    earlier = Invoice.objects.filter(
        tenant=invoice.tenant, state=Invoice.State.DRAFT, period_start__lt=invoice.period_start
    ).first()
    if earlier is not None:
        raise Conflict(f"issue the earlier invoice {earlier.public_id} ({earlier.period_start:%Y-%m}) first")
    _fill(invoice, _ledger_head(settled=True))
    invoice.state, invoice.issued_at = Invoice.State.ISSUED, timezone.now()
    invoice.save(update_fields=["state", "issued_at"])
    audit.record(
        actor,
        "invoice.issue",
        object_type="invoice",
        object_id=invoice.public_id,
        tenant=invoice.tenant,
        after={
            "total": str(invoice.total),
            "currency": invoice.currency,
            "period": f"{invoice.period_start:%Y-%m}",
            "lines": invoice.lines.count(),
        },
    )
    return invoice


def record_export(*, actor: Actor, tenant: Tenant | None, what: str, object_id: str) -> None:
    """Every export download is audited: who took which bill out of the system."""
    audit.record(
        actor,
        "billing.export",
        object_type="export",
        object_id=object_id,
        tenant=tenant,
        after={"format": what},
    )


# --- Budgets ---------------------------------------------------------------------------------------------


@transaction.atomic
def set_budget(
    *,
    actor: Actor,
    tenant: Tenant,
    monthly_amount: Any,
    currency: str = "USD",
    webhook_url: str = "",
    email: str = "",
    enforce: bool = False,
) -> Budget:
    """Set the tenant's monthly budget. Owners and admins of the tenant, or platform administrators."""
    require(actor, tenant, "budget.manage", "setting a budget")
    amount = _decimal(monthly_amount, "monthly_amount").quantize(CENT, ROUND_HALF_UP)
    if amount == 0:
        raise ValidationFailed.on("monthly_amount", "a budget must be more than 0")
    before = Budget.objects.filter(tenant=tenant).values("monthly_amount", "enforce").first()
    budget, _ = Budget.objects.update_or_create(
        tenant=tenant,
        defaults={
            "monthly_amount": amount,
            "currency": currency.upper(),
            "webhook_url": webhook_url,
            "email": email,
            "enforce": enforce,
        },
    )
    audit.record(
        actor,
        "budget.set",
        object_type="budget",
        object_id=tenant.public_id,
        tenant=tenant,
        before={k: str(v) for k, v in before.items()} if before else None,
        after={"monthly_amount": str(amount), "currency": budget.currency, "enforce": enforce},
    )
    return budget


def spent_this_month(tenant: Tenant, now: datetime) -> Decimal:
    """What the tenant's usage of the current month costs so far, at the rate cards in force."""
    start, end = month_bounds(now.year, now.month)
    rows = (
        UsageHour.objects.filter(tenant=tenant, hour__gte=start, hour__lt=end)
        .values("gpu_class", "hour")
        .annotate(gpu_us=Sum("gpu_us"))
        .order_by("gpu_class", "hour")
    )
    sums = [(r["gpu_class"], r["hour"], r["gpu_us"]) for r in rows]
    return sum((line.amount for line in rate(tenant, sums, InvoiceLine.Kind.USAGE)), Decimal(0))


def check_budget(budget: Budget, now: datetime) -> list[BudgetAlert]:
    """Raise each threshold the month's spend has crossed, once per month: audit, webhook, e-mail, hold."""
    tenant = budget.tenant
    spent = spent_this_month(tenant, now)
    start, _ = month_bounds(now.year, now.month)
    alerts = []
    with transaction.atomic():
        for threshold in THRESHOLDS:
            if spent * 100 < budget.monthly_amount * threshold:
                break
            alert, created = BudgetAlert.objects.get_or_create(
                budget=budget, period_start=start, threshold=threshold, defaults={"spent": spent}
            )
            if created:
                alerts.append(alert)
                _raise_alert(budget, alert)
    return alerts


def _raise_alert(budget: Budget, alert: BudgetAlert) -> None:
    tenant = budget.tenant
    payload = {
        "tenant": tenant.slug,
        "threshold_percent": alert.threshold,
        "spent": str(alert.spent),
        "budget": str(budget.monthly_amount),
        "currency": budget.currency,
        "month": f"{alert.period_start:%Y-%m}",
    }
    audit.record(
        Actor.system("budgets"),
        "budget.threshold_crossed",
        object_type="budget",
        object_id=tenant.public_id,
        tenant=tenant,
        after=payload,
    )
    if budget.webhook_url:
        url = budget.webhook_url
        transaction.on_commit(lambda: _post_webhook(url, payload))
    if budget.email and settings.BILLING_ALERT_EMAIL_FROM:
        address = budget.email
        transaction.on_commit(lambda: _send_email(address, payload))
    if alert.threshold == 100 and budget.enforce and tenant.state == Tenant.State.READY:
        _hold_queues(tenant)


def _hold_queues(tenant: Tenant) -> None:
    """Enforcement: the tenant is suspended, which holds its queues (Kueue stopPolicy Hold)."""
    suspend_tenant(actor=Actor.console("budget-enforcement"), tenant=tenant)


def _post_webhook(url: str, payload: dict[str, Any]) -> None:
    request = urllib.request.Request(
        url, data=json.dumps(payload).encode(), headers={"Content-Type": "application/json"}, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=settings.BILLING_WEBHOOK_TIMEOUT):
            pass
    except OSError as exc:  # the alert stands in the audit log; a dead webhook must not stop metering
        log.warning("budget webhook failed", extra={"url": url, "error": str(exc)})


def _send_email(address: str, payload: dict[str, Any]) -> None:
    subject = f"gpucloud: {payload['tenant']} reached {payload['threshold_percent']} % of its budget"
    body = (
        f"Tenant {payload['tenant']} has spent {payload['spent']} {payload['currency']} of its "
        f"{payload['budget']} {payload['currency']} budget for {payload['month']}."
    )
    try:
        send_mail(subject, body, settings.BILLING_ALERT_EMAIL_FROM, [address])
    except OSError as exc:
        log.warning("budget e-mail failed", extra={"to": address, "error": str(exc)})


def check_budgets(now: datetime | None = None) -> int:
    """Check every budget; returns how many alerts were raised."""
    now = now or timezone.now()
    budgets = Budget.objects.select_related("tenant").exclude(tenant__state=Tenant.State.DELETED)
    return sum(len(check_budget(b, now)) for b in budgets)
