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
_PREFIXES = tuple(FAMILIES)

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


class _Series(NamedTuple):
    """The parsed identity behind one distinct label string (cached per call)."""

    key: DeviceKey
    holder: Holder | None
    model: str
    gpu_index: str
    mig_profile: str | None


class LabelError(ValueError):
    """A label set that is not valid exposition syntax, or lacks the GPU UUID."""


def parse(text: str | bytes, *, default_hostname: str = "") -> ParseResult:
    """Read one dcgm-exporter exposition and return the billing families per device.

    ``default_hostname`` names the node when the exporter was run without a hostname
    label (``DCGM_EXPORTER_NO_HOSTNAME``); the scraper knows which node it asked.
    Lines of other families and comments are skipped without being validated.
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    result = ParseResult(devices={})
    cache: dict[str, _Series] = {}
    lineno = 0
    for lineno, line in enumerate(text.split("\n"), 1):
        # The cheap test first: about four lines in five belong to other families.
        if line.startswith(_PREFIXES):
            _read_line(line, lineno, result, cache, default_hostname)
    result.lines = lineno - 1 if text.endswith("\n") else lineno
    return result


def _read_line(
    line: str, lineno: int, result: ParseResult, cache: dict[str, _Series], default_hostname: str
) -> None:
    """Parse one line that starts like a wanted family, recording it or why not."""
    brace = line.find("{")
    if brace < 0:
        name, _, rest = line.partition(" ")
        labels = ""
    else:
        name = line[:brace]
        close = line.rfind("}")
        if close < brace:
            _bad(result, lineno, name, "unterminated label set")
            return
        labels, rest = line[brace + 1 : close], line[close + 1 :]
    slot = FAMILIES.get(name.rstrip())
    if slot is None:
        return  # a longer name sharing the prefix, e.g. DCGM_FI_DEV_FB_USED_PERCENT
    series = cache.get(labels)
    if series is None:
        try:
            series = cache[labels] = _series(labels, default_hostname)
        except LabelError as exc:
            _bad(result, lineno, name, str(exc))
            return
    try:
        value, timestamp = _value(rest)
    except ValueError:
        _bad(result, lineno, name, "bad or missing value")
        return
    _record(result, series, slot, value, timestamp)


def _bad(result: ParseResult, lineno: int, name: str, reason: str) -> None:
    result.bad_lines.append(BadLine(lineno, f"{name}: {reason}"))


def _value(rest: str) -> tuple[float, int | None]:
    """The sample value and optional millisecond timestamp after the label set."""
    parts = rest.split()
    if len(parts) == 1:
        return float(parts[0]), None
    if len(parts) == 2:
        return float(parts[0]), int(parts[1])
    raise ValueError(rest)


def _record(result: ParseResult, series: _Series, slot: int, value: float, timestamp: int | None) -> None:
    """Fold one sample into its device's record."""
    devices = result.devices
    record = devices.get(series.key)
    if record is None:
        record = devices[series.key] = DeviceRecord(
            series.key, series.model, series.gpu_index, series.mig_profile, timestamp_ms=timestamp
        )
    holder = series.holder
    if holder is not None and holder not in record.holders:
        record.holders.append(holder)
    result.samples += 1
    if _is_blank(value, slot):
        result.blank_values += 1
    elif record.values[slot] is None:
        record.values[slot] = value


def _is_blank(value: float, slot: int) -> bool:
    if value >= INT64_BLANK or not math.isfinite(value):
        return True
    return slot in _FP64_FIELDS and FP64_BLANK <= value < FP64_BLANK + 64


def parse_labels(labels: str) -> dict[str, str]:
    """Parse the inside of ``{...}`` into a dict, unescaping values.

    Raises ``LabelError`` when the text is not a well-formed label set.
    """
    if _LABELS_RE.fullmatch(labels) is None:
        raise LabelError("garbled label set")
    return {name: _unescape(value) for name, value in _PAIR_RE.findall(labels)}


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


def _series(labels: str, default_hostname: str) -> _Series:
    """Turn one label string into a device key, holder and GPU-class inputs."""
    parsed = parse_labels(labels)
    uuid = parsed.get("UUID") or parsed.get("uuid")
    if not uuid:
        raise LabelError("no UUID label")
    hostname = _first(parsed, _HOSTNAME) or default_hostname
    pod = _first(parsed, _POD)
    holder = Holder(_first(parsed, _NAMESPACE), pod, _first(parsed, _CONTAINER)) if pod else None
    gpu_instance = parsed.get("GPU_I_ID") or None
    return _Series(
        key=DeviceKey(hostname, uuid, gpu_instance),
        holder=holder,
        model=parsed.get("modelName", ""),
        gpu_index=parsed.get("gpu", ""),
        mig_profile=parsed.get("GPU_I_PROFILE") or None,
    )
