"""Where a tenant stands now: per GPU class its guarantee, burst, what it uses, borrows and lends; per running
pod its GPU utilisation; and, for the roles that may see money, what that costs.

The API (`GET /api/v1/tenants/{slug}/standing/`), the portal's Standing tab and `manage.py tenant_standing`
all read `standing_of`; docs/api.md says how each figure is made. In short:

- **In use** counts the tenant's live pod rows (`fleet.models.Pod`, not finished) as `units_in_use` does,
  the figure the dashboard and the quota bars show.
- **Borrowed** is what it uses beyond its guarantee, up to its burst: `min(max(0, in use - guaranteed),
  burst)`.
- **Lent** is the part of its idle guarantee the rest of its cohort is using. A cohort is what Kueue's is
  (`clusters.render.kueue`): the tenants of one trust tier on one host cluster, per GPU class. gpucloud keeps
  no ClusterQueue status, so this is computed from the same pod rows: the cohort's borrowing (each other
  tenant's borrowed units) is shared among the tenants with idle lendable guarantee, in proportion to it
  (largest remainder, whole units), each bounded by what it may lend: its idle guarantee, capped by
  `lendable` (all of it while the tenant is asleep, as the reconciler renders). Kueue does not say whose
  guarantee a borrower took, so the split is gpucloud's; the cohort's total is exact.
- **Utilisation** of a pod: the latest DCGM sample metering kept for its devices (`MeterState`, the mean over
  its devices; a pod holding a share or MIG instance gets the figure DCGM gives that device), and its mean
  over the hours metered since it started (`UsageHour`, utilisation-weighted GPU-seconds over GPU-seconds).
  Pods are listed idle first, those not yet sampled last. **Memory**: `DCGM_FI_DEV_FB_USED` of its devices
  at the latest scrape (`MeterState.memory`), summed; a share sees its whole GPU's, as DCGM does not split it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from django.db.models import Sum
from django.utils import timezone

from billing.metering import Integrator
from billing.models import InvoiceLine, MeterState, UsageHour
from billing.services.budgets import spent_this_month
from billing.services.invoicing import rate
from billing.services.rates import CENT, card_at, cards_in_force, multiplier_of, price_of
from fleet.models import Pod
from fleet.selectors import units_in_use, units_of
from tenants.models import Quota, Tenant

MICRO_HOUR = 3_600_000_000  # micro GPU-seconds in a GPU-hour


@dataclass(frozen=True)
class ClassStanding:
    """One GPU class of a tenant: its quota and what it uses, borrows and lends now (units of the class)."""

    gpu_class: str
    guaranteed: int
    burst: int
    lendable: int | None
    in_use: int
    borrowed: int
    lent: int
    price_per_hour: Decimal | None = None  # per unit, the tenant's tier multiplier applied; cost only
    cost_per_hour: Decimal | None = None  # of what it uses now


@dataclass(frozen=True)
class WorkloadUse:
    """One running pod of the tenant and how busy its GPUs are."""

    namespace: str
    name: str
    gpu_class: str
    units: int
    node: str
    started_at: datetime
    utilisation: float | None  # latest sample, 0-100; None before metering saw it
    sampled_at: datetime | None
    memory_mib: float | None  # framebuffer used on its devices at that sample (a share: the whole GPU's)
    mean_utilisation: float | None  # over the hours metered since it started, 0-100
    gpu_hours: float  # metered since it started
    cost: Decimal | None = None  # of those GPU-hours; cost only


@dataclass(frozen=True)
class Standing:
    """A tenant's standing at `at`; the money fields are None unless asked `with_cost`."""

    tenant: Tenant
    at: datetime
    classes: list[ClassStanding]
    workloads: list[WorkloadUse]
    currency: str | None = None
    spent_this_month: Decimal | None = None


def standing_of(tenant: Tenant, *, with_cost: bool, now: datetime | None = None) -> Standing:
    """Where the tenant stands now (see the module's docstring for how each figure is made)."""
    now = now or timezone.now()
    classes = class_standing(tenant)
    pods = list(
        Pod.objects.filter(tenant=tenant, finished_at__isnull=True).select_related("gpu_class", "node")
    )
    workloads = _workloads(tenant, pods, with_cost)
    if not with_cost:
        return Standing(tenant, now, classes, workloads)
    card = card_at(cards_in_force(now, now + timedelta(seconds=1)), now)
    return Standing(
        tenant,
        now,
        [_priced(c, card, tenant.trust_tier) for c in classes],
        workloads,
        currency=card.currency if card else "USD",
        spent_this_month=spent_this_month(tenant, now),
    )


def cohort_of(tenant: Tenant) -> list[Tenant]:
    """The tenants Kueue puts in one cohort with `tenant` (itself included): same host cluster, same tier."""
    return list(
        Tenant.objects.filter(
            cluster__host_cluster_id=tenant.cluster.host_cluster_id, trust_tier=tenant.trust_tier
        )
        .exclude(state=Tenant.State.DELETED)
        .order_by("slug")
    )


def class_standing(tenant: Tenant) -> list[ClassStanding]:
    """Per GPU class the tenant has a quota of or uses: guaranteed, burst, in use, borrowed, lent."""
    cohort = cohort_of(tenant)
    used = units_in_use(t.pk for t in cohort)
    quotas: dict[tuple[int, str], Quota] = {
        (q.tenant_id, q.gpu_class.name): q
        for q in Quota.objects.filter(tenant__in=cohort).select_related("gpu_class")
    }
    names = {name for tenant_id, name in (*quotas, *used) if tenant_id == tenant.pk}
    rows = []
    for name in sorted(names):
        shares = [_Share.of(t, quotas.get((t.pk, name)), used.get((t.pk, name), 0)) for t in cohort]
        mine = next(s for s in shares if s.tenant_id == tenant.pk)
        rows.append(
            ClassStanding(
                gpu_class=name,
                guaranteed=mine.guaranteed,
                burst=mine.burst,
                lendable=mine.lendable,
                in_use=mine.used,
                borrowed=mine.borrowed,
                lent=lent_by(shares).get(tenant.pk, 0),
            )
        )
    return rows


@dataclass(frozen=True)
class _Share:
    """One cohort member's quota of one class and what it uses of it."""

    tenant_id: int
    guaranteed: int
    burst: int
    lendable: int | None
    used: int
    asleep: bool = False

    @classmethod
    def of(cls, tenant: Tenant, quota: Quota | None, used: int) -> _Share:
        if quota is None:
            return cls(tenant.pk, 0, 0, None, used)
        asleep = tenant.asleep_since is not None
        return cls(tenant.pk, quota.guaranteed, quota.burst, quota.lendable, used, asleep)

    @property
    def borrowed(self) -> int:
        """In use beyond the guarantee, up to the burst (Kueue's borrowingLimit)."""
        return min(max(0, self.used - self.guaranteed), self.burst)

    @property
    def idle_lendable(self) -> int:
        """Idle guarantee others may borrow: capped by `lendable` (Kueue's lendingLimit), all when asleep."""
        cap = self.guaranteed if self.lendable is None or self.asleep else min(self.lendable, self.guaranteed)
        return min(max(0, self.guaranteed - self.used), cap)


def lent_by(shares: Iterable[_Share]) -> dict[int, int]:
    """Units each member lends: the cohort's borrowing shared among the members with idle lendable
    guarantee, in proportion to it, in whole units (largest remainder; ties to the earlier member)."""
    shares = list(shares)
    borrowing = sum(s.borrowed for s in shares)
    idle = {s.tenant_id: s.idle_lendable for s in shares if s.idle_lendable > 0}
    supply = sum(idle.values())
    if borrowing >= supply:
        return idle  # all of it is lent (more cannot be: the rest was not theirs to lend)
    # Integer arithmetic: each share is borrowing × units / supply, its floor and remainder exact.
    lent = {tenant_id: borrowing * units // supply for tenant_id, units in idle.items()}
    remainder = {tenant_id: borrowing * units % supply for tenant_id, units in idle.items()}
    left = borrowing - sum(lent.values())
    order = sorted(idle, key=lambda tenant_id: -remainder[tenant_id])  # stable: ties keep cohort order
    for tenant_id in order[:left]:
        lent[tenant_id] += 1
    return lent


def _priced(row: ClassStanding, card: Any, tier: str) -> ClassStanding:
    price = price_of(card, row.gpu_class) if card else None
    if price is None:
        return row
    unit = (price * multiplier_of(card, tier)).quantize(Decimal("0.000001"), ROUND_HALF_UP)
    cost = (unit * row.in_use).quantize(CENT, ROUND_HALF_UP)
    return replace(row, price_per_hour=unit, cost_per_hour=cost)


def _workloads(tenant: Tenant, pods: list[Pod], with_cost: bool) -> list[WorkloadUse]:
    """The running pods with their latest and mean utilisation, idle first, pods not yet sampled last."""
    latest = _latest_samples(tenant, pods)
    metered = _metered(tenant, pods)
    rows = []
    for pod in pods:
        hours = metered.get((pod.namespace, pod.name), [])
        gpu_us = sum(r[2] for r in hours)
        util_us = sum(r[3] for r in hours)
        now = latest.get((pod.namespace, pod.name))
        rows.append(
            WorkloadUse(
                namespace=pod.namespace,
                name=pod.name,
                gpu_class=pod.gpu_class.name,
                units=units_of(pod),
                node=pod.node.name,
                started_at=pod.started_at,
                utilisation=now.utilisation if now else None,
                sampled_at=now.sampled_at if now else None,
                memory_mib=now.memory_mib if now else None,
                mean_utilisation=round(100 * util_us / gpu_us, 1) if gpu_us else None,
                gpu_hours=gpu_us / MICRO_HOUR,
                cost=_cost(tenant, hours) if with_cost else None,
            )
        )
    return sorted(rows, key=_idle_first)


def _idle_first(row: WorkloadUse) -> tuple[bool, float, str, str]:
    known = row.utilisation if row.utilisation is not None else row.mean_utilisation
    return known is None, known or 0.0, row.namespace, row.name


def _cost(tenant: Tenant, hours: list[tuple[str, datetime, int, int]]) -> Decimal:
    lines = rate(tenant, [(c, h, gpu_us) for c, h, gpu_us, _ in hours], InvoiceLine.Kind.USAGE)
    return sum((line.amount for line in lines), Decimal(0))


def _metered(tenant: Tenant, pods: list[Pod]) -> dict[tuple[str, str], list[tuple[str, datetime, int, int]]]:
    """Each pod's ledger hours since the hour it started: (class, hour, GPU µs, utilised GPU µs); one query.

    A pod name that comes back (a Job's retry) is told from its predecessor by that start hour.
    """
    if not pods:
        return {}
    starts = {(p.namespace, p.name): p.started_at.replace(minute=0, second=0, microsecond=0) for p in pods}
    rows = (
        UsageHour.objects.filter(
            tenant=tenant, pod__in={p.name for p in pods}, hour__gte=min(starts.values())
        )
        .values("namespace", "pod", "gpu_class", "hour")
        .annotate(gpu_us=Sum("gpu_us"), util_gpu_us=Sum("util_gpu_us"))
        .order_by("namespace", "pod", "gpu_class", "hour")
    )
    out: dict[tuple[str, str], list[tuple[str, datetime, int, int]]] = defaultdict(list)
    for r in rows:
        key = (r["namespace"], r["pod"])
        if key in starts and r["hour"] >= starts[key]:
            out[key].append((r["gpu_class"], r["hour"], r["gpu_us"], r["util_gpu_us"]))
    return out


@dataclass(frozen=True)
class _Latest:
    """A pod at the latest sample metering kept of its devices."""

    utilisation: float | None
    sampled_at: datetime
    memory_mib: float | None


def _latest_samples(tenant: Tenant, pods: list[Pod]) -> dict[tuple[str, str], _Latest]:
    """Each pod at the latest sample metering kept of its nodes: utilisation (0-100, the mean over the devices
    it held then), framebuffer memory used on them (MiB, summed), and when that sample was taken."""
    nodes = {p.node.name for p in pods}
    if not nodes:
        return {}
    states = MeterState.objects.filter(host_cluster_id=tenant.cluster.host_cluster_id, node__in=nodes)
    utils: dict[tuple[str, str], list[float]] = defaultdict(list)
    memory: dict[tuple[str, str], list[float]] = defaultdict(list)
    times: dict[tuple[str, str], float] = {}
    for state, used in states.values_list("state", "memory"):
        if not state:
            continue  # a node locked for its first scrape, nothing integrated yet
        for device, sample in Integrator.from_state(state).last.items():
            name = device.uuid if device.gpu_instance is None else f"{device.uuid}/{device.gpu_instance}"
            for holding in sample.holders:
                key = (holding.namespace, holding.pod)
                times[key] = max(times.get(key, sample.t), sample.t)
                if sample.util is not None:
                    utils[key].append(sample.util)
                if name in (used or {}):
                    memory[key].append(used[name])
    return {
        key: _Latest(
            round(100 * sum(utils[key]) / len(utils[key]), 1) if utils[key] else None,
            _moment(t),
            sum(memory[key]) if memory[key] else None,
        )
        for key, t in times.items()
    }


def _moment(t: float) -> datetime:
    return datetime.fromtimestamp(t, tz=UTC)
