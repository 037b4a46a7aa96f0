"""The integration rule: DCGM samples per device -> GPU-seconds, utilised GPU-seconds, joules.

Pure Python, no Django. The ingest service keeps one ``Integrator`` state per host
cluster in the database: it loads it (``Integrator.from_state``), feeds one collection
round (``ingest_round``), takes the contributions (``drain``) and writes them to the
usage ledger together with the new ``state()`` in one transaction. Feeding rounds one
by one this way gives the same ledger as feeding everything at once.

The rule, in prose and with examples, is in ``docs/billing.md``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any, NamedTuple

from billing.dcgm import DeviceKey, DeviceRecord, ParseResult

HOUR = 3600
STATE_VERSION = 2
#: Default collection interval of dcgm-exporter (``--collect-interval`` 30000 ms).
DEFAULT_INTERVAL = 30.0

#: (modelName, MIG profile or None): what the catalog turns into a GPU class.
GpuClassInput = tuple[str, str | None]
PodRef = tuple[str, str]

NOBODY = ("", "")


class Holding(NamedTuple):
    """A pod holding (part of) a device at a sample; ``fraction`` of the device when known."""

    namespace: str
    pod: str
    fraction: float | None = None


class Sample(NamedTuple):
    """What one collection round saw on one device at time ``t`` (Unix seconds).

    ``holders`` empty means nobody held it (platform idle). ``util`` is 0-1.
    ``energy_mj`` is the device's energy counter; on a MIG instance it is the parent
    GPU's counter and ``energy_fraction`` the instance's share of it.
    """

    t: float
    holders: tuple[Holding, ...] = ()
    util: float | None = None
    energy_mj: float | None = None
    energy_fraction: float = 1.0
    gpu_class: GpuClassInput = ("", None)


class PodLifecycle(NamedTuple):
    """A pod's exact start and finish (Unix seconds) when the cluster reports them."""

    start: float | None = None
    finish: float | None = None


class Unseen(NamedTuple):
    """A pod the cluster says held a GPU from ``start`` to ``finish`` (Unix seconds), known to have lived
    wholly between two samples of it, so in neither; ``fraction`` of the GPU when it held a share, or the MIG
    instance ``gpu_instance`` (DCGM's ``GPU_I_ID``) of profile ``mig_profile`` when it held one."""

    namespace: str
    pod: str
    start: float
    finish: float
    fraction: float | None = None
    gpu_instance: str | None = None
    mig_profile: str | None = None


class LedgerKey(NamedTuple):
    """One ledger cell. ``namespace`` and ``pod`` are empty for platform idle time."""

    namespace: str
    pod: str
    device: DeviceKey
    gpu_class: GpuClassInput
    hour: int


@dataclass(slots=True)
class Usage:
    """The three measures summed in one ledger cell."""

    gpu_seconds: float = 0.0
    util_gpu_seconds: float = 0.0
    joules: float = 0.0


class Gap(NamedTuple):
    """An interval longer than ``max_gap`` between two samples of a device: not billed."""

    device: DeviceKey
    start: float
    end: float


class LateSample(NamedTuple):
    """A sample older than the newest already integrated for its device: rejected."""

    device: DeviceKey
    t: float
    integrated_until: float


@dataclass(slots=True)
class Contributions:
    """What ``Integrator.drain`` hands to the ledger writer."""

    ledger: dict[LedgerKey, Usage]
    gaps: list[Gap]
    late: list[LateSample]
    duplicates: int
    accepted: int


@dataclass(slots=True)
class _Span:
    """A pod's occupancy inside one interval, and its holding on each side of the middle."""

    start: float
    end: float
    before: Holding | None
    after: Holding | None


@dataclass(slots=True)
class Integrator:
    """Incremental integrator with one explicit piece of state per device: its last sample.

    ``lifecycle`` maps (namespace, pod) to known start/finish times; the caller keeps it
    up to date from the cluster. ``unseen`` maps a GPU's UUID to pods that held it (or one of its MIG
    instances) and have finished, so that one that lived wholly between two samples is billed its lifetime
    (rule 3b). Neither is part of
    the persisted state.
    """

    max_gap: float = 2 * DEFAULT_INTERVAL
    lifecycle: Mapping[PodRef, PodLifecycle] = field(default_factory=dict)
    unseen: Mapping[str, Sequence[Unseen]] = field(default_factory=dict)
    last: dict[DeviceKey, Sample] = field(default_factory=dict)
    ledger: dict[LedgerKey, Usage] = field(default_factory=dict)
    gaps: list[Gap] = field(default_factory=list)
    late: list[LateSample] = field(default_factory=list)
    duplicates: int = 0
    accepted: int = 0

    def ingest(self, device: DeviceKey, sample: Sample) -> None:
        """Integrate one sample: the interval since the device's previous sample is billed."""
        previous = self.last.get(device)
        if previous is None:
            self.last[device] = sample
            self.accepted += 1
            return
        if sample.t < previous.t:
            self.late.append(LateSample(device, sample.t, previous.t))
            return
        if sample.t == previous.t:
            self.duplicates += 1
            return
        self.accepted += 1
        self.last[device] = sample
        if sample.t - previous.t > self.max_gap:
            self.gaps.append(Gap(device, previous.t, sample.t))
            return
        self._integrate(device, previous, sample)

    def ingest_round(self, samples: Iterable[tuple[DeviceKey, Sample]]) -> None:
        """Integrate a batch of (device, sample) pairs in arrival order."""
        for device, sample in samples:
            self.ingest(device, sample)

    def drain(self) -> Contributions:
        """Hand over and forget what was integrated since the last drain; the state stays."""
        out = Contributions(self.ledger, self.gaps, self.late, self.duplicates, self.accepted)
        self.ledger, self.gaps, self.late = {}, [], []
        self.duplicates = self.accepted = 0
        return out

    def state(self) -> dict[str, Any]:
        """The per-device state as plain JSON-ready data (lists, dicts, str, float, None)."""
        return {"version": STATE_VERSION, "devices": [_state_row(k, s) for k, s in self.last.items()]}

    @classmethod
    def from_state(
        cls,
        state: Mapping[str, Any],
        *,
        max_gap: float = 2 * DEFAULT_INTERVAL,
        lifecycle: Mapping[PodRef, PodLifecycle] | None = None,
        unseen: Mapping[str, Sequence[Unseen]] | None = None,
    ) -> Integrator:
        """Rebuild an integrator from ``state()`` output."""
        if state.get("version") != STATE_VERSION:
            raise ValueError(f"unknown metering state version {state.get('version')!r}")
        last = dict(_from_state_row(row) for row in state["devices"])
        return cls(max_gap=max_gap, lifecycle=lifecycle or {}, unseen=unseen or {}, last=last)

    def _integrate(self, device: DeviceKey, s0: Sample, s1: Sample) -> None:
        """Bill the interval (s0.t, s1.t] by the half-interval rule."""
        dt = s1.t - s0.t
        mid = s0.t + dt / 2
        ghosts = self._ghosts(device, s0, s1)
        same_pods = _same_pods(s0.holders, s1.holders) and not ghosts
        hour = int(s0.t // HOUR) * HOUR
        if same_pods and s1.t <= hour + HOUR and s0.holders == s1.holders and s0.gpu_class == s1.gpu_class:
            self._unchanged(device, s0, s1, hour)
            return
        joule_rate = _energy_joules(s0, s1) / dt
        if same_pods:
            # Nobody came or went, so no edge falls inside the interval: just the two halves.
            self._segment(device, s0, s0.holders, s0.t, mid, joule_rate)
            self._segment(device, s1, s1.holders, mid, s1.t, joule_rate)
            return
        spans = self._spans(s0, s1, mid)
        for ghost in ghosts:
            held = Holding(ghost.namespace, ghost.pod, ghost.fraction)
            spans[(ghost.namespace, ghost.pod)] = _Span(ghost.start, ghost.finish, held, held)
        cuts = sorted({s0.t, mid, s1.t, *(x for sp in spans.values() for x in (sp.start, sp.end))})
        for p, q in pairwise(cuts):
            early = q <= mid
            holdings = [_holding_for(sp, early) for sp in spans.values() if sp.start <= p and sp.end >= q]
            self._segment(device, s0 if early else s1, holdings, p, q, joule_rate)

    def _ghosts(self, device: DeviceKey, s0: Sample, s1: Sample) -> list[Unseen]:
        """Pods that held this device wholly inside (s0, s1) by the cluster's word (rule 3b).

        On a device nobody held at either sample (a whole GPU, or a MIG instance of the pod's profile), all
        of them. On a GPU DCGM saw held, only pods with a declared fraction that fits in what the holders'
        declared fractions leave (`_fitting`), so an unseen pod never takes a share of a pod DCGM saw.
        """
        if not self.unseen:
            return []
        ghosts = [
            u
            for u in self.unseen.get(device.uuid, ())
            if u.gpu_instance == device.gpu_instance and s0.t <= u.start < u.finish <= s1.t
        ]
        if not ghosts:
            return []
        if device.gpu_instance is not None:
            profiles = {s0.gpu_class[1], s1.gpu_class[1]}
            if s0.holders or s1.holders:
                return []
            return [u for u in ghosts if u.mig_profile is None or profiles == {u.mig_profile}]
        if not s0.holders and not s1.holders:
            return ghosts
        return _fitting(ghosts, (*s0.holders, *s1.holders))

    def _unchanged(self, device: DeviceKey, s0: Sample, s1: Sample, hour: int) -> None:
        """An interval inside one hour with the same holdings and class at both ends: one cell each.

        Same result as billing the two halves separately, in half the ledger updates.
        """
        dt = s1.t - s0.t
        half = dt / 2
        util_seconds = (half * s0.util if s0.util is not None else 0.0) + (
            half * s1.util if s1.util is not None else 0.0
        )
        joules = _energy_joules(s0, s1)
        shares = split_shares(s0.holders)
        for holding, share in zip(s0.holders, shares, strict=True):
            key = LedgerKey(holding.namespace, holding.pod, device, s0.gpu_class, hour)
            self._cell(key, dt * share, util_seconds * share, joules * share)
        rest = 1.0 - sum(shares)
        if rest > 1e-12:
            self._cell(
                LedgerKey("", "", device, s0.gpu_class, hour), dt * rest, util_seconds * rest, joules * rest
            )

    def _cell(self, key: LedgerKey, seconds: float, util_seconds: float, joules: float) -> None:
        usage = self.ledger.get(key)
        if usage is None:
            usage = self.ledger[key] = Usage()
        usage.gpu_seconds += seconds
        usage.util_gpu_seconds += util_seconds
        usage.joules += joules

    def _segment(
        self,
        device: DeviceKey,
        side: Sample,
        holdings: Sequence[Holding],
        p: float,
        q: float,
        joule_rate: float,
    ) -> None:
        """Bill [p, q] to the holdings present by their shares; what is left is platform idle."""
        shares = split_shares(holdings)
        for holding, share in zip(holdings, shares, strict=True):
            self._add((holding.namespace, holding.pod), device, side, p, q, share, joule_rate)
        rest = 1.0 - sum(shares)
        if rest > 1e-12:
            self._add(NOBODY, device, side, p, q, rest, joule_rate)

    def _spans(self, s0: Sample, s1: Sample, mid: float) -> dict[PodRef, _Span]:
        """Each pod's occupancy in the interval: half-interval edges unless known exactly."""
        spans: dict[PodRef, _Span] = {}
        for h in s0.holders:
            spans[(h.namespace, h.pod)] = _Span(s0.t, mid, h, None)
        for h in s1.holders:
            span = spans.get((h.namespace, h.pod))
            if span is None:
                spans[(h.namespace, h.pod)] = _Span(mid, s1.t, None, h)
            else:
                span.end, span.after = s1.t, h
        if self.lifecycle:
            for pod, span in spans.items():
                _apply_lifecycle(span, self.lifecycle.get(pod), s0.t, s1.t)
        return {pod: sp for pod, sp in spans.items() if sp.end > sp.start}

    def _add(
        self,
        pod: PodRef,
        device: DeviceKey,
        side: Sample,
        p: float,
        q: float,
        share: float,
        joule_rate: float,
    ) -> None:
        """Add share x [p, q] to the pod's ledger cells, split exactly at hour boundaries."""
        util = side.util
        while p < q:
            hour = int(p // HOUR) * HOUR
            end = min(q, hour + HOUR)
            seconds = (end - p) * share
            key = LedgerKey(pod[0], pod[1], device, side.gpu_class, hour)
            self._cell(key, seconds, seconds * util if util is not None else 0.0, seconds * joule_rate)
            p = end


def _fitting(ghosts: Sequence[Unseen], holders: Sequence[Holding]) -> list[Unseen]:
    """The unseen pods that fit beside the holders DCGM saw on a shared GPU without changing their shares.

    Every holder needs a declared fraction (one without takes an equal part of whatever is left, so any
    newcomer would shrink it); the holders' fractions at either sample (the larger where a pod has two) plus
    those of every unseen pod overlapping this one in time must not pass the whole GPU. Then each present
    pod gets exactly its fraction (rule 4) and the unseen one takes only idle time. Otherwise it is not
    billed: its exact share cannot be known.
    """
    declared: dict[PodRef, float] = {}
    for h in holders:
        if h.fraction is None:
            return []
        ref = (h.namespace, h.pod)
        declared[ref] = max(declared.get(ref, 0.0), h.fraction)
    room = 1.0 - sum(declared.values())
    return [
        u
        for u in ghosts
        if u.fraction is not None
        and sum(
            1.0 if v.fraction is None else v.fraction
            for v in ghosts
            if v.start < u.finish and u.start < v.finish
        )
        <= room + 1e-9
    ]


def _same_pods(a: tuple[Holding, ...], b: tuple[Holding, ...]) -> bool:
    return len(a) == len(b) and all(
        x.pod == y.pod and x.namespace == y.namespace for x, y in zip(a, b, strict=True)
    )


def _apply_lifecycle(span: _Span, known: PodLifecycle | None, t0: float, t1: float) -> None:
    """Replace a half-interval edge by the pod's exact start or finish, kept inside the interval."""
    if known is None:
        return
    if span.before is None and known.start is not None:
        span.start = min(max(known.start, t0), t1)
    if span.after is None and known.finish is not None:
        span.end = min(max(known.finish, t0), t1)


def _holding_for(span: _Span, early_half: bool) -> Holding:
    """The holding that describes the pod in this half (its own sample if it has one)."""
    first, second = (span.before, span.after) if early_half else (span.after, span.before)
    holding = first or second
    assert holding is not None  # a span always comes from at least one sample
    return holding


def split_shares(holdings: Sequence[Holding]) -> list[float]:
    """Each holder's share of the device; what is left over is platform idle.

    Known fractions are used as given (scaled down if they add up to more than 1); holders
    without one split what the known fractions leave, equally.
    """
    if len(holdings) == 1 and holdings[0].fraction is None:
        return [1.0]  # the common case: one pod holds the whole device
    known = sum(h.fraction for h in holdings if h.fraction is not None)
    unknown = sum(1 for h in holdings if h.fraction is None)
    if known > 1.0:
        return [h.fraction / known if h.fraction is not None else 0.0 for h in holdings]
    each = (1.0 - known) / unknown if unknown else 0.0
    return [h.fraction if h.fraction is not None else each for h in holdings]


def _energy_joules(s0: Sample, s1: Sample) -> float:
    """Energy in the interval from the mJ counter; a decrease is a reset, counted from 0."""
    if s0.energy_mj is None or s1.energy_mj is None:
        return 0.0
    delta = s1.energy_mj - s0.energy_mj
    if delta < 0:
        delta = s1.energy_mj
    return delta / 1000.0 * s1.energy_fraction


# One flat JSON list per device keeps the state small and cheap to (de)serialise: about
# 14,000 devices per round, and every nested container costs JSON and GC time.
STATE_ROW = (
    "hostname",
    "uuid",
    "gpu_instance",
    "t",
    "util",
    "energy_mj",
    "energy_fraction",
    "model",
    "mig_profile",
    "then per holder: namespace, pod, fraction",
)
_FIXED = 9


def _state_row(device: DeviceKey, sample: Sample) -> list[Any]:
    """A device's last sample as one flat JSON-ready list, laid out as ``STATE_ROW``."""
    row = [*device, sample.t, sample.util, sample.energy_mj, sample.energy_fraction, *sample.gpu_class]
    for holding in sample.holders:
        row += holding
    return row


def _from_state_row(row: Sequence[Any]) -> tuple[DeviceKey, Sample]:
    """Inverse of ``_state_row``."""
    hostname, uuid, gpu_instance, t, util, energy_mj, energy_fraction, model, profile = row[:_FIXED]
    holders = tuple(Holding(*row[i : i + 3]) for i in range(_FIXED, len(row), 3))
    sample = Sample(t, holders, util, energy_mj, energy_fraction, (model, profile))
    return DeviceKey(hostname, uuid, gpu_instance), sample


_NO_FRACTIONS: Mapping[PodRef, float] = {}
_MIG_SLICES_RE = re.compile(r"(\d+)g\.")


def mig_slices_of(model: str) -> int:
    """Compute slices of a MIG-capable GPU: 4 on A30, 7 on A100/H100/H200/B200."""
    return 4 if "A30" in model else 7


def mig_fraction(model: str, profile: str, slices_of: Callable[[str], int] = mig_slices_of) -> float:
    """The share of the parent GPU a MIG profile holds, e.g. ``3g.40gb`` on H100 -> 3/7.

    An unreadable profile gets 0 so that energy is never over-attributed.
    """
    match = _MIG_SLICES_RE.search(profile)
    if match is None:
        return 0.0
    return min(1.0, int(match.group(1)) / slices_of(model))


def samples_from_exposition(
    result: ParseResult,
    t: float,
    *,
    fractions: Mapping[PodRef, float] | None = None,
    slices_of: Callable[[str], int] = mig_slices_of,
) -> list[tuple[DeviceKey, Sample]]:
    """Turn one parsed round into samples at time ``t``, ready for ``Integrator.ingest_round``.

    The whole-GPU record of a MIG-partitioned GPU is not a billable device (its instances
    are); it only lends its energy counter to instances that lack one. ``fractions`` gives
    known shares of time-sliced / HAMi pods.
    """
    mig_parents = {(k.hostname, k.uuid) for k in result.devices if k.gpu_instance is not None}
    fraction_of: dict[tuple[str, str | None], float] = {}  # one regex per profile, not per instance
    fractions = fractions or _NO_FRACTIONS
    out = []
    for key, record in result.devices.items():
        values = record.values
        if key.gpu_instance is None:
            if mig_parents and (key.hostname, key.uuid) in mig_parents:
                continue
            energy, energy_fraction = values[3], 1.0
        else:
            energy, energy_fraction = _mig_energy(result, record, slices_of, fraction_of)
        gpu_class = (record.model, record.mig_profile)
        sample = Sample(
            t, _holdings(record, fractions), _utilisation(values), energy, energy_fraction, gpu_class
        )
        out.append((key, sample))
    return out


def utilisation(record: DeviceRecord) -> float | None:
    """GR_ENGINE_ACTIVE (0-1) when present, else GPU_UTIL / 100, clamped to 0-1."""
    return _utilisation(record.values)


def _utilisation(values: list[float | None]) -> float | None:
    value = values[1]  # GR_ENGINE_ACTIVE: works per MIG instance, unlike GPU_UTIL
    if value is None:
        util = values[0]
        if util is None:
            return None
        value = util / 100.0
    return 1.0 if value > 1.0 else 0.0 if value < 0.0 else value


def _holdings(record: DeviceRecord, fractions: Mapping[PodRef, float]) -> tuple[Holding, ...]:
    holders = record.holders
    if not holders:
        return ()
    if len(holders) == 1:
        ns, pod = holders[0].namespace, holders[0].pod
        return (Holding(ns, pod, fractions.get((ns, pod)) if fractions else None),)
    # Several containers of one pod are one holder.
    pods = dict.fromkeys((h.namespace, h.pod) for h in holders)
    return tuple(Holding(ns, pod, fractions.get((ns, pod))) for ns, pod in pods)


def _mig_energy(
    result: ParseResult,
    record: DeviceRecord,
    slices_of: Callable[[str], int],
    fraction_of: dict[tuple[str, str | None], float],
) -> tuple[float | None, float]:
    """A MIG instance's energy counter (its own, else the parent's) and its share by slices."""
    key = record.key
    energy = record.energy_mj
    if energy is None:
        parent = result.devices.get(DeviceKey(key.hostname, key.uuid, None))
        energy = parent.energy_mj if parent is not None else None
    fraction = fraction_of.get((record.model, record.mig_profile))
    if fraction is None:
        fraction = fraction_of[(record.model, record.mig_profile)] = mig_fraction(
            record.model, record.mig_profile or "", slices_of
        )
    return energy, fraction
