"""The health rules: what a DCGM reading or a node condition means, and whether it takes hardware out.

Pure (no Django): `health.services.observe` feeds it the readings and the settings (`Rules.from_settings`),
and acts on the verdicts. The default XID classes follow NVIDIA's XID catalogue ("Resolution Bucket"), as
`docs/health.md` lists them: application XIDs are ignored, reset-class XIDs and reboot/contact-support XIDs
are fatal and quarantine the GPU; an XID in no list is a warning unless `HEALTH_XID_UNKNOWN` says fatal.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

INFO, WARNING, FATAL = "info", "warning", "fatal"

# dcgm-exporter's health fields (`../shared/reference/integration-shapes.md` §4.3); `billing.dcgm_health`
# reads them from the expositions.
XID = "DCGM_FI_DEV_XID_ERRORS"
ECC_DBE = "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"
ROW_REMAP_FAILURE = "DCGM_FI_DEV_ROW_REMAP_FAILURE"
ROW_REMAP_PENDING = "DCGM_FI_DEV_ROW_REMAP_PENDING"
RETIRED_SBE = "DCGM_FI_DEV_RETIRED_SBE"
RETIRED_DBE = "DCGM_FI_DEV_RETIRED_DBE"
RETIRED_PENDING = "DCGM_FI_DEV_RETIRED_PENDING"
NVLINK_ERRORS = tuple(
    f"DCGM_FI_DEV_NVLINK_{kind}_ERROR_COUNT_TOTAL" for kind in ("CRC_FLIT", "CRC_DATA", "REPLAY", "RECOVERY")
)
THERMAL_VIOLATION = "DCGM_FI_DEV_THERMAL_VIOLATION"
POWER_VIOLATION = "DCGM_FI_DEV_POWER_VIOLATION"
FIELDS = (
    XID, ECC_DBE, ROW_REMAP_FAILURE, ROW_REMAP_PENDING, RETIRED_SBE, RETIRED_DBE, RETIRED_PENDING,
    *NVLINK_ERRORS, THERMAL_VIOLATION, POWER_VIOLATION,
)  # fmt: skip
#: Counters: a round judges how much they rose since the node's previous scrape.
COUNTERS = (*NVLINK_ERRORS, THERMAL_VIOLATION, POWER_VIOLATION)

#: Every GPU signal a DCGM round judges; an open event of one of these not seen in a round is clean there.
DCGM_SIGNALS = frozenset(
    {
        "xid", "ecc_dbe", "row_remap_failure", "row_remap_pending", "retired_pages", "retired_pages_pending",
        "nvlink_errors", "thermal_violation", "power_violation", "gpu_missing",
    }
)  # fmt: skip
#: Kubernetes' own node conditions; `Ready` is judged by its status, the pressure ones are warnings when True.
KUBELET_CONDITIONS = frozenset(
    {"Ready", "MemoryPressure", "DiskPressure", "PIDPressure", "NetworkUnavailable"}
)
#: Conditions NVSentinel sets on nodes (their type is its check name).
NVSENTINEL_CONDITIONS = frozenset(
    {
        "SysLogsXIDError", "SysLogsSXIDError", "SysLogsGPUFallenOff", "GpuMemWatch", "GpuThermalWatch",
        "GpuPcieWatch", "GpuPowerWatch", "GpuNvlinkWatch", "CSPMaintenance",
    }
)  # fmt: skip


@dataclass(frozen=True)
class Rules:
    """The rule set, from settings."""

    xid_ignored: frozenset[int]
    xid_reset: frozenset[int]
    xid_fatal: frozenset[int]
    xid_unknown: str = WARNING
    retired_pages_limit: int = 60
    nvlink_errors_per_round: int = 100
    throttle_share: float = 0.5
    node_conditions_fatal: frozenset[str] = frozenset()

    @classmethod
    def from_settings(cls, settings: Any) -> Rules:
        def ints(values: Iterable[str]) -> frozenset[int]:
            return frozenset(int(v) for v in values)

        return cls(
            xid_ignored=ints(settings.HEALTH_XID_IGNORED),
            xid_reset=ints(settings.HEALTH_XID_RESET),
            xid_fatal=ints(settings.HEALTH_XID_FATAL),
            xid_unknown=FATAL if settings.HEALTH_XID_UNKNOWN == FATAL else WARNING,
            retired_pages_limit=settings.HEALTH_RETIRED_PAGES_LIMIT,
            nvlink_errors_per_round=settings.HEALTH_NVLINK_ERRORS_PER_ROUND,
            throttle_share=settings.HEALTH_THROTTLE_SHARE,
            node_conditions_fatal=frozenset(settings.HEALTH_NODE_CONDITIONS_FATAL),
        )


@dataclass(frozen=True)
class Finding:
    """One signal that fired: its name and value, how bad, whether it quarantines, and what fixes it."""

    signal: str
    value: str
    severity: str
    quarantine: bool
    recommended: str
    message: str

    @property
    def reason(self) -> str:
        """A short reason, fit for a taint value (63 characters of [A-Za-z0-9._-])."""
        text = f"{self.signal}-{self.value}" if self.signal == "xid" else self.signal
        cleaned = "".join(c if c.isalnum() or c in "._-" else "-" for c in text.replace("_", "-"))
        return cleaned.strip("-._")[:63] or "fault"


def xid(code: int, rules: Rules) -> Finding | None:
    """The last XID a GPU reported (0: none)."""
    if code <= 0:
        return None
    if code in rules.xid_ignored:
        return Finding("xid", str(code), INFO, False, "", f"XID {code}: the application's fault; GPU healthy")
    if code in rules.xid_reset:
        return Finding("xid", str(code), FATAL, True, "reset GPU", f"XID {code}: the GPU needs a reset")
    if code in rules.xid_fatal:
        action = "reboot node" if code in (79, 160) else "contact support"
        return Finding("xid", str(code), FATAL, True, action, f"XID {code}: fatal ({action})")
    severity = rules.xid_unknown
    return Finding("xid", str(code), severity, severity == FATAL, "", f"XID {code}: not in the rule set")


def gpu_findings(
    fields: Mapping[str, float],
    previous: Mapping[str, float] | None,
    elapsed: float | None,
    rules: Rules,
) -> list[Finding]:
    """What one GPU's health fields in one scrape say; `previous` (the node's last scrape) and `elapsed`
    (seconds since it) judge the counters: a first sight or a counter that went down (a reset) say nothing.
    """
    out: list[Finding] = []
    code = int(fields.get(XID, 0))
    found = xid(code, rules)
    if found is not None:
        out.append(found)
    if fields.get(ECC_DBE, 0) > 0:
        value = f"{fields[ECC_DBE]:g}"
        out.append(
            Finding("ecc_dbe", value, FATAL, True, "reset GPU", f"{value} volatile double-bit ECC errors")
        )
    if fields.get(ROW_REMAP_FAILURE, 0) > 0:
        out.append(Finding("row_remap_failure", "1", FATAL, True, "replace GPU", "a row remapping failed"))
    if fields.get(ROW_REMAP_PENDING, 0) > 0:
        message = "row remapping pending: applied at the next GPU reset"
        out.append(Finding("row_remap_pending", "1", WARNING, False, "reset GPU", message))
    retired = fields.get(RETIRED_SBE, 0) + fields.get(RETIRED_DBE, 0)
    if retired >= rules.retired_pages_limit:
        message = f"{retired:g} retired pages (limit {rules.retired_pages_limit})"
        out.append(Finding("retired_pages", f"{retired:g}", FATAL, True, "replace GPU", message))
    if fields.get(RETIRED_PENDING, 0) > 0:
        message = "page retirement pending: applied at the next GPU reset"
        out.append(Finding("retired_pages_pending", "1", WARNING, False, "reset GPU", message))
    if previous is not None:
        out += _counter_findings(fields, previous, elapsed, rules)
    return out


def _rise(fields: Mapping[str, float], previous: Mapping[str, float], names: Iterable[str]) -> float | None:
    """How much the counters present now rose since the previous scrape (a counter it did not show was 0);
    None when they fell (a reset) or are not reported."""
    present = [n for n in names if n in fields]
    if not present:
        return None
    rise = sum(fields[n] for n in present) - sum(previous.get(n, 0.0) for n in present)
    return rise if rise > 0 else None


def _counter_findings(
    fields: Mapping[str, float], previous: Mapping[str, float], elapsed: float | None, rules: Rules
) -> list[Finding]:
    out = []
    errors = _rise(fields, previous, NVLINK_ERRORS)
    if errors is not None and errors >= rules.nvlink_errors_per_round:
        message = f"{errors:g} NVLink CRC/replay/recovery errors since the last scrape"
        out.append(Finding("nvlink_errors", f"{errors:g}", WARNING, False, "check NVLink", message))
    for name, signal in ((THERMAL_VIOLATION, "thermal_violation"), (POWER_VIOLATION, "power_violation")):
        rise = _rise(fields, previous, (name,))
        if rise is None or not elapsed:
            continue
        share = rise / 1e9 / elapsed  # the counters count nanoseconds of throttling
        if share >= rules.throttle_share:
            message = f"throttled {share:.0%} of the time since the last scrape ({signal.split('_')[0]})"
            out.append(Finding(signal, f"{share:.2f}", WARNING, False, "check cooling and power", message))
    return out


def node_findings(ready: str, conditions: Mapping[str, tuple[str, str]], rules: Rules) -> list[Finding]:
    """What a node's conditions say: `ready` is the Ready condition's status (True, False, Unknown);
    `conditions` maps every other condition type to (status, reason: message)."""
    out = []
    if ready != "True":
        message = (
            "the kubelet reports the node not ready" if ready == "False" else "the node stopped reporting"
        )
        out.append(Finding("node_not_ready", ready or "Unknown", WARNING, False, "", message))
    for kind, (status, text) in sorted(conditions.items()):
        if status != "True" or kind == "Ready":
            continue
        fatal = kind in rules.node_conditions_fatal
        severity = FATAL if fatal else WARNING
        recommended = "repair node" if fatal else ""
        out.append(Finding(f"condition:{kind}", "True", severity, fatal, recommended, text[:500]))
    return out


def condition_source(kind: str) -> str:
    """Who sets a node condition: NVSentinel's check names, else Kubernetes (kubelet, Problem Detector)."""
    return "nvsentinel" if kind in NVSENTINEL_CONDITIONS else "kubernetes"
