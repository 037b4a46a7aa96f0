"""Fast, tolerant reader of dcgm-exporter's Prometheus text exposition, for billing.

It reads only the five families billing needs: one regex scan finds their lines, and
every other line is skipped without reaching Python code, so a 10,000-GPU round (about
250,000 series) costs a fraction of a general-purpose parser. Label strings repeat across
families for the same device, so each distinct one is parsed once per call (or once per
``Parser``) and then looked up.

No Django import: this module is benchmarked and tested on its own (``benchmarks.metering``).
See ``docs/billing.md`` for the behaviour in prose.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import NamedTuple

GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"
GR_ENGINE_ACTIVE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
FB_USED = "DCGM_FI_DEV_FB_USED"
TOTAL_ENERGY = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"
POWER_USAGE = "DCGM_FI_DEV_POWER_USAGE"

#: Family name -> slot in ``DeviceRecord.values``.
FAMILIES: dict[str, int] = {
    GPU_UTIL: 0,
    GR_ENGINE_ACTIVE: 1,
    FB_USED: 2,
    TOTAL_ENERGY: 3,
    POWER_USAGE: 4,
}

# DCGM reports "blank" (not supported / not found) int64 fields as 0x7ffffffffffffff0 and
# up; they would read as 9.22e18 % utilisation or mJ, so they are treated as missing.
INT64_BLANK = float(0x7FFFFFFFFFFFFFF0)
# fp64 blanks (DCGM_FP64_BLANK = 2**47 and a few codes above it) only apply to the
# fields DCGM stores as doubles; an int64 energy counter may legitimately pass 2**47.
FP64_BLANK = float(2**47)
_FP64_END = FP64_BLANK + 64
_FP64_FIELDS = frozenset({FAMILIES[GR_ENGINE_ACTIVE], FAMILIES[POWER_USAGE]})

# One label pair; values may contain escaped quotes, backslashes and newlines.
_PAIR = r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\\n]|\\.)*)"\s*'
_PAIR_RE = re.compile(_PAIR)
_LABELS_RE = re.compile(rf"(?:{_PAIR}(?:,{_PAIR})*,?\s*)?")
_ESCAPE_RE = re.compile(r"\\(.)")
_PLAIN_NAMES_RE = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*=(?:\|,[a-zA-Z_][a-zA-Z0-9_]*=)*\|,?")


class DeviceKey(NamedTuple):
    """A billable device: a whole GPU (``gpu_instance`` None) or one MIG GPU instance."""

    hostname: str
    uuid: str
    gpu_instance: str | None


class Holder(NamedTuple):
    """A pod seen on a device in one row of the exposition."""

    namespace: str
    pod: str
    container: str


@dataclass(slots=True)
class DeviceRecord:
    """Everything one round said about one device.

    ``values`` is indexed by ``FAMILIES``; ``None`` means absent, blank, NaN or infinite.
    When several rows describe the same device (time-slicing emits one per pod) the
    first usable value of each family wins: the exporter repeats whole-device values.
    """

    key: DeviceKey
    model: str
    gpu_index: str
    mig_profile: str | None
    holders: list[Holder] = field(default_factory=list)
    values: list[float | None] = field(default_factory=lambda: [None] * len(FAMILIES))
    timestamp_ms: int | None = None

    @property
    def gpu_util(self) -> float | None:
        """``DCGM_FI_DEV_GPU_UTIL``, percent."""
        return self.values[0]

    @property
    def gr_engine_active(self) -> float | None:
        """``DCGM_FI_PROF_GR_ENGINE_ACTIVE``, ratio 0-1."""
        return self.values[1]

    @property
    def fb_used_mib(self) -> float | None:
        """``DCGM_FI_DEV_FB_USED``, MiB."""
        return self.values[2]

    @property
    def energy_mj(self) -> float | None:
        """``DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION``, mJ since boot (a counter)."""
        return self.values[3]

    @property
    def power_w(self) -> float | None:
        """``DCGM_FI_DEV_POWER_USAGE``, W."""
        return self.values[4]


class BadLine(NamedTuple):
    """A line of a wanted family that could not be read; it was skipped, the rest kept."""

    lineno: int
    reason: str


@dataclass(slots=True)
class ParseResult:
    """One exposition, read: the devices, and what was skipped or rejected."""

    devices: dict[DeviceKey, DeviceRecord]
    lines: int = 0
    samples: int = 0
    blank_values: int = 0
    bad_lines: list[BadLine] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when no line of a wanted family was garbled."""
        return not self.bad_lines


class LabelError(ValueError):
    """A label set that is not valid exposition syntax, or lacks the GPU UUID."""


# A wanted family's line, found by the regex engine's fast literal search for newline +
# common prefix, so the other ~80 % of lines never reach Python code. Groups: name, the
# label set (up to the last ``}``, as values may hold braces), and the value part.
_LINE_RE = re.compile(
    r"\n(DCGM_FI_(?:DEV_GPU_UTIL|PROF_GR_ENGINE_ACTIVE|DEV_FB_USED|DEV_TOTAL_ENERGY_CONSUMPTION|DEV_POWER_USAGE))"
    r"(?![A-Za-z0-9_:])(?:\{([^\n]*)\})?([^\n]*)"
)
_INF = math.inf

# Per call: label string -> (its device's record, the row's holder), or why it is bad.
_Entry = tuple["DeviceRecord", "Holder | None"]


def parse(text: str | bytes, *, default_hostname: str = "") -> ParseResult:
    """Read one dcgm-exporter exposition and return the billing families per device.

    ``default_hostname`` names the node when the exporter was run without a hostname
    label (``DCGM_EXPORTER_NO_HOSTNAME``); the scraper knows which node it asked.
    Lines of other families and comments are skipped without being validated.
    """
    return _parse(text, default_hostname, {})


class Parser:
    """A parser that remembers parsed label sets between calls.

    A node's label sets change only when pods come and go, so a collector that keeps one
    ``Parser`` per host cluster parses almost no labels from the second round on. The
    memory is dropped whole when it passes ``max_label_sets``.
    """

    def __init__(self, max_label_sets: int = 500_000) -> None:
        self.max_label_sets = max_label_sets
        self._identities: dict[str, _Identity | str] = {}

    def parse(self, text: str | bytes, *, default_hostname: str = "") -> ParseResult:
        """Same result as the module-level ``parse``."""
        if len(self._identities) > self.max_label_sets:
            self._identities.clear()
        return _parse(text, default_hostname, self._identities)


class _Identity(NamedTuple):
    """What one label set says, independent of the round: device, class inputs, holder."""

    key: DeviceKey
    model: str
    gpu_index: str
    mig_profile: str | None
    holder: Holder | None


def _parse(text: str | bytes, default_hostname: str, identities: dict[str, _Identity | str]) -> ParseResult:
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    result = ParseResult(devices={}, lines=text.count("\n") + (0 if text.endswith("\n") or not text else 1))
    rows = _LINE_RE.findall(text)
    # The first line has no newline before it; it is matched on its own.
    first = _LINE_RE.match("\n" + _first_line(text)) if text.startswith("DCGM_FI_") else None
    if first is not None:
        rows.insert(0, first.groups())
    bad = _fold(result, rows, default_hostname, identities)
    if bad:
        result.bad_lines = _number(text, bad, first is not None)
    return result


def _first_line(text: str) -> str:
    end = text.find("\n")
    return text if end < 0 else text[:end]


def _fold(
    result: ParseResult,
    rows: list[tuple[str, str, str]],
    default_hostname: str,
    identities: dict[str, _Identity | str],
) -> list[tuple[int, str]]:
    """Fold every wanted row into its device's record; return (row index, reason) of bad rows.

    This is the hot loop (one pass over ~60,000 rows per 10,000 GPUs), so it is written
    inline rather than as small calls.
    """
    seen: dict[str, _Entry | str] = {}
    bad: list[tuple[int, str]] = []
    samples = blanks = 0
    for index, (name, labels, rest) in enumerate(rows):
        entry = seen.get(labels)
        if entry is None:
            entry = seen[labels] = _device(result, labels, default_hostname, identities)
        if isinstance(entry, str):
            # An unterminated label set leaves the labels group empty and the rest starting "{".
            reason = "unterminated label set" if rest[:1] == "{" else entry
            bad.append((index, f"{name}: {reason}"))
            continue
        try:
            value = float(rest)  # float() skips the surrounding spaces (and a CR) itself
        except ValueError:
            stamped = _value_and_timestamp(entry[0], rest)
            if stamped is None:
                bad.append((index, f"{name}: bad or missing value"))
                continue
            value = stamped
        samples += 1
        slot = FAMILIES[name]
        if (
            value >= INT64_BLANK
            or value != value
            or value == -_INF
            or (FP64_BLANK <= value < _FP64_END and slot in _FP64_FIELDS)
        ):
            blanks += 1
        elif entry[0].values[slot] is None:
            entry[0].values[slot] = value
    result.samples += samples
    result.blank_values += blanks
    return bad


def _value_and_timestamp(record: DeviceRecord, rest: str) -> float | None:
    """The value when a millisecond timestamp follows it (kept on the record); None if garbled."""
    parts = rest.split()
    if len(parts) != 2:
        return None
    try:
        value, timestamp = float(parts[0]), int(parts[1])
    except ValueError:
        return None
    if record.timestamp_ms is None:
        record.timestamp_ms = timestamp
    return value


def _number(text: str, bad: list[tuple[int, str]], first: bool) -> list[BadLine]:
    """Line numbers of bad rows, worked out only when there are some (a second scan)."""
    wanted = dict(bad)
    out = []
    if first and 0 in wanted:
        out.append(BadLine(1, wanted.pop(0)))
    offset = 1 if first else 0
    for index, match in enumerate(_LINE_RE.finditer(text), offset):
        reason = wanted.get(index)
        if reason is not None:
            out.append(BadLine(text.count("\n", 0, match.start()) + 2, reason))
    return out


def _device(
    result: ParseResult, labels: str, default_hostname: str, identities: dict[str, _Identity | str]
) -> _Entry | str:
    """The record a label set's rows fold into (created on first sight), or why it is bad."""
    identity = identities.get(labels)
    if identity is None:
        identity = identities[labels] = _identity(labels)
    if isinstance(identity, str):
        return identity
    key = identity.key
    if not key.hostname:
        key = key._replace(hostname=default_hostname)
    record = result.devices.get(key)
    if record is None:
        record = result.devices[key] = DeviceRecord(
            key, identity.model, identity.gpu_index, identity.mig_profile
        )
    holder = identity.holder
    if holder is not None and holder not in record.holders:
        record.holders.append(holder)
    return record, holder


def _identity(labels: str) -> _Identity | str:
    """Parse a label set into what billing needs from it, or say why it is bad."""
    try:
        get = _raw_labels(labels).get
    except LabelError as exc:
        return str(exc)
    uuid = get(",UUID=") or get(",uuid=")
    if not uuid:
        return "no UUID label"
    # Aliases, best first. Behind a Prometheus ServiceMonitor without honorLabels the
    # exporter's own ``pod`` becomes ``exported_pod`` and ``pod`` names the exporter pod,
    # so the ``exported_`` form must win; ``pod_name`` etc. are the exporter's old names.
    pod = get(",exported_pod=") or get(",pod=") or get(",pod_name=")
    holder = None
    if pod:
        namespace = get(",exported_namespace=") or get(",namespace=") or get(",pod_namespace=") or ""
        container = get(",exported_container=") or get(",container=") or get(",container_name=") or ""
        holder = Holder(namespace, pod, container)
    hostname = get(",hostname=") or get(",Hostname=") or ""  # renamed in dcgm-exporter 2026
    return _Identity(
        DeviceKey(hostname, uuid, get(",GPU_I_ID=") or None),
        get(",modelName=", ""),
        get(",gpu=", ""),
        get(",GPU_I_PROFILE=") or None,
        holder,
    )


def _raw_labels(labels: str) -> dict[str, str]:
    """A label set as ``{",name=": value}``.

    Keyed by the exposition's own text between values, which the fast path gets for free
    from splitting on quotes: building clean names cost a third of the label parsing.
    """
    if "\\" not in labels:
        parts = labels.split('"')
        pieces = parts[0::2]
        if _PLAIN_NAMES_RE.fullmatch("|".join(pieces)) is not None:
            pieces[0] = "," + pieces[0]
            # The piece after the last value pairs with nothing and is dropped.
            return dict(zip(pieces, parts[1::2], strict=False))
    return {f",{name}=": value for name, value in parse_labels(labels).items()}


def parse_labels(labels: str) -> dict[str, str]:
    """Parse the inside of ``{...}`` into a dict, unescaping values.

    Raises ``LabelError`` when the text is not a well-formed label set.
    """
    if "\\" not in labels:
        return _parse_plain_labels(labels)
    if _LABELS_RE.fullmatch(labels) is None:
        raise LabelError("garbled label set")
    return {name: _unescape(value) for name, value in _PAIR_RE.findall(labels)}


def _parse_plain_labels(labels: str) -> dict[str, str]:
    """Fast path without backslashes: every quote then delimits a value, so split on quotes.

    The text between values must read ``name=``, ``,name=``, ... and end in nothing or a
    comma (the canonical form every exporter writes); one regex over just those short
    pieces proves it. Anything else (spaces around ``=``, say) takes the general path.
    """
    parts = labels.split('"')
    if _PLAIN_NAMES_RE.fullmatch("|".join(parts[0::2])) is not None:
        names = [part[1:-1] for part in parts[2:-1:2]]
        names.insert(0, parts[0][:-1])
        return dict(zip(names, parts[1::2], strict=True))
    if _LABELS_RE.fullmatch(labels) is None:
        raise LabelError("garbled label set")
    return dict(_PAIR_RE.findall(labels))


def _unescape(value: str) -> str:
    if "\\" not in value:
        return value
    return _ESCAPE_RE.sub(lambda m: "\n" if m.group(1) == "n" else m.group(1), value)
