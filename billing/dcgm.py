"""Fast, tolerant reader of dcgm-exporter's Prometheus text exposition, for billing.

It reads only the five families billing needs and skips every other line after one
prefix check, so a 10,000-GPU round (about 250,000 series) costs a fraction of a
general-purpose parser. Label strings repeat across families for the same device, so
each distinct label string is parsed once per call and then looked up.

No Django import: this module is benchmarked and tested on its own (``billing.bench``).
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
_FP64_FIELDS = frozenset({FAMILIES[GR_ENGINE_ACTIVE], FAMILIES[POWER_USAGE]})

# One label pair; values may contain escaped quotes, backslashes and newlines.
_PAIR = r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\\n]|\\.)*)"\s*'
_PAIR_RE = re.compile(_PAIR)
_LABELS_RE = re.compile(rf"(?:{_PAIR}(?:,{_PAIR})*,?\s*)?")
_ESCAPE_RE = re.compile(r"\\(.)")
_PLAIN_PAIR_RE = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="([^"]*)"')

# Label aliases, best first. Behind a Prometheus ServiceMonitor without honorLabels the
# exporter's own ``pod`` becomes ``exported_pod`` and ``pod`` names the exporter pod,
# so the ``exported_`` form must win when both are present.
_HOSTNAME = ("hostname", "Hostname")
_POD = ("exported_pod", "pod", "pod_name")
_NAMESPACE = ("exported_namespace", "namespace", "pod_namespace")
_CONTAINER = ("exported_container", "container", "container_name")


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


# A wanted family's line, found by the regex engine's fast literal search for the
# newline + common prefix, so the other ~80 % of lines never reach Python code.
_LINE_RE = re.compile(
    r"\n(DCGM_FI_(?:DEV_GPU_UTIL|PROF_GR_ENGINE_ACTIVE|DEV_FB_USED|DEV_TOTAL_ENERGY_CONSUMPTION|DEV_POWER_USAGE))"
    r"([^\n]*)"
)

# Per call: label string -> (its device's record, the row's holder), or the reason it is bad.
_Entry = tuple["DeviceRecord", "Holder | None"]
_Seen = dict[str, "_Entry | str"]


def parse(text: str | bytes, *, default_hostname: str = "") -> ParseResult:
    """Read one dcgm-exporter exposition and return the billing families per device.

    ``default_hostname`` names the node when the exporter was run without a hostname
    label (``DCGM_EXPORTER_NO_HOSTNAME``); the scraper knows which node it asked.
    Lines of other families and comments are skipped without being validated.
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    result = ParseResult(devices={}, lines=text.count("\n") + (0 if text.endswith("\n") or not text else 1))
    seen: _Seen = {}
    first = _LINE_RE.match("\n" + text[: text.find("\n") % (len(text) + 1)])
    matches = _LINE_RE.finditer(text)
    for match in (first, *matches) if first is not None else matches:
        name, rest = match.groups()
        reason = _line(result, seen, default_hostname, name, rest)
        if reason is not None:
            # Line numbers are only worked out for the rare bad line.
            lineno = 1 if match is first else text.count("\n", 0, match.start()) + 2
            result.bad_lines.append(BadLine(lineno, f"{name}: {reason}"))
    return result


def _line(result: ParseResult, seen: _Seen, default_hostname: str, name: str, rest: str) -> str | None:
    """Fold one wanted line into its device's record; return why it is bad, or None."""
    if rest[:1] == "{":
        close = rest.rfind("}")
        if close < 0:
            return "unterminated label set"
        labels, rest = rest[1:close], rest[close + 1 :]
    elif rest[:1] in (" ", "\t"):
        labels = ""
    elif rest:
        return None  # a longer name sharing the prefix, e.g. DCGM_FI_DEV_FB_USED_PERCENT
    else:
        return "truncated after the metric name"
    entry = seen.get(labels)
    if entry is None:
        entry = seen[labels] = _device(result, labels, default_hostname)
    if isinstance(entry, str):
        return entry
    parts = rest.split()
    try:
        value = float(parts[0])
        if len(parts) == 2:
            timestamp = int(parts[1])
        elif len(parts) != 1:
            return "bad or missing value"
    except (ValueError, IndexError):
        return "bad or missing value"
    _record(result, entry, FAMILIES[name], value, timestamp if len(parts) == 2 else None)
    return None


def _record(
    result: ParseResult,
    entry: _Entry,
    slot: int,
    value: float,
    timestamp: int | None,
) -> None:
    record, holder = entry
    if holder is not None and holder not in record.holders:
        record.holders.append(holder)
    if timestamp is not None and record.timestamp_ms is None:
        record.timestamp_ms = timestamp
    result.samples += 1
    if _is_blank(value, slot):
        result.blank_values += 1
    elif record.values[slot] is None:
        record.values[slot] = value


def _device(
    result: ParseResult, labels: str, default_hostname: str
) -> tuple[DeviceRecord, Holder | None] | str:
    """The record a label string's rows fold into (created on first sight), or why it is bad."""
    try:
        parsed = parse_labels(labels)
    except LabelError as exc:
        return str(exc)
    uuid = parsed.get("UUID") or parsed.get("uuid")
    if not uuid:
        return "no UUID label"
    key = DeviceKey(_first(parsed, _HOSTNAME) or default_hostname, uuid, parsed.get("GPU_I_ID") or None)
    record = result.devices.get(key)
    if record is None:
        record = result.devices[key] = DeviceRecord(
            key, parsed.get("modelName", ""), parsed.get("gpu", ""), parsed.get("GPU_I_PROFILE") or None
        )
    pod = _first(parsed, _POD)
    return record, Holder(_first(parsed, _NAMESPACE), pod, _first(parsed, _CONTAINER)) if pod else None


def _is_blank(value: float, slot: int) -> bool:
    if value >= INT64_BLANK or not math.isfinite(value):
        return True
    return slot in _FP64_FIELDS and FP64_BLANK <= value < FP64_BLANK + 64


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
    """Fast path without backslashes: read the pairs, then prove they are the whole text.

    Rebuilding the canonical form (no spaces, no trailing comma, as every exporter writes
    it) and comparing is cheaper than a validating regex; anything else takes the slow path.
    """
    pairs = _PLAIN_PAIR_RE.findall(labels)
    if ",".join([f'{name}="{value}"' for name, value in pairs]) == labels:
        return dict(pairs)
    if _LABELS_RE.fullmatch(labels) is None:
        raise LabelError("garbled label set")
    return dict(_PAIR_RE.findall(labels))


def _unescape(value: str) -> str:
    if "\\" not in value:
        return value
    return _ESCAPE_RE.sub(lambda m: "\n" if m.group(1) == "n" else m.group(1), value)


def _first(labels: dict[str, str], names: tuple[str, ...]) -> str:
    for name in names:
        value = labels.get(name)
        if value:
            return value
    return ""
