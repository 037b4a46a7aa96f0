"""The health rules on their own: XID classes, thresholds, counters judged by their rise, node conditions."""

from types import SimpleNamespace

import pytest

from fleet.health_rules import (
    ECC_DBE,
    NVLINK_ERRORS,
    RETIRED_DBE,
    RETIRED_SBE,
    THERMAL_VIOLATION,
    XID,
    Finding,
    Rules,
    gpu_findings,
    node_findings,
)

RULES = Rules(
    xid_ignored=frozenset({13, 31, 43, 45}),
    xid_reset=frozenset({48, 62}),
    xid_fatal=frozenset({79}),
    node_conditions_fatal=frozenset({"KernelDeadlock"}),
)


def signals(found: list[Finding]) -> list[tuple[str, str, str, bool]]:
    return [(f.signal, f.value, f.severity, f.quarantine) for f in found]


@pytest.mark.parametrize(
    ("code", "severity", "quarantine", "recommended"),
    [
        (13, "info", False, ""),
        (48, "fatal", True, "reset GPU"),
        (79, "fatal", True, "reboot node"),
        (200, "warning", False, ""),
    ],
)
def test_an_xid_is_judged_by_its_class(code, severity, quarantine, recommended):
    (found,) = gpu_findings({XID: code}, None, None, RULES)
    assert (found.severity, found.quarantine, found.recommended) == (severity, quarantine, recommended)


def test_no_xid_and_clean_fields_say_nothing():
    assert gpu_findings({XID: 0, ECC_DBE: 0, RETIRED_DBE: 3}, {}, 30.0, RULES) == []


def test_an_unknown_xid_is_fatal_when_the_settings_say_so():
    rules = Rules(frozenset(), frozenset(), frozenset(), xid_unknown="fatal")
    assert signals(gpu_findings({XID: 999}, None, None, rules)) == [("xid", "999", "fatal", True)]


def test_ecc_and_retired_pages_over_the_limit_quarantine():
    found = gpu_findings({ECC_DBE: 2, RETIRED_SBE: 40, RETIRED_DBE: 20}, None, None, RULES)
    assert signals(found) == [("ecc_dbe", "2", "fatal", True), ("retired_pages", "60", "fatal", True)]


def test_counters_are_judged_by_their_rise_since_the_previous_scrape():
    now = dict.fromkeys(NVLINK_ERRORS, 60.0)
    assert gpu_findings(now, None, None, RULES) == []  # first sight: no baseline
    assert signals(gpu_findings(now, dict.fromkeys(NVLINK_ERRORS, 30.0), 30.0, RULES)) == [
        ("nvlink_errors", "120", "warning", False)
    ]
    assert gpu_findings(now, dict.fromkeys(NVLINK_ERRORS, 50.0), 30.0, RULES) == []  # rose by 40: below 100
    assert gpu_findings(dict.fromkeys(NVLINK_ERRORS, 1.0), now, 30.0, RULES) == []  # a reset


def test_throttling_for_most_of_the_interval_is_a_warning():
    thirty_s = 30 * 10**9
    found = gpu_findings({THERMAL_VIOLATION: 0.9 * thirty_s}, {}, 30.0, RULES)
    assert signals(found) == [("thermal_violation", "0.90", "warning", False)]
    assert gpu_findings({THERMAL_VIOLATION: 0.1 * thirty_s}, {}, 30.0, RULES) == []


def test_node_conditions_fatal_by_setting_others_warnings_and_not_ready():
    found = node_findings(
        "False",
        {
            "KernelDeadlock": ("True", "DockerHung: blocked"),
            "MemoryPressure": ("False", ""),
            "Other": ("True", ""),
        },
        RULES,
    )
    assert signals(found) == [
        ("node_not_ready", "False", "warning", False),
        ("condition:KernelDeadlock", "True", "fatal", True),
        ("condition:Other", "True", "warning", False),
    ]


def test_the_reason_is_a_valid_taint_value():
    assert Finding("xid", "79", "fatal", True, "", "").reason == "xid-79"
    assert Finding("condition:Some Thing/x", "True", "fatal", True, "", "").reason == "condition-Some-Thing-x"
    assert len(Finding("condition:" + "x" * 100, "True", "fatal", True, "", "").reason) == 63


def test_rules_come_from_settings():
    settings = SimpleNamespace(
        HEALTH_XID_IGNORED=["13"], HEALTH_XID_RESET=["48"], HEALTH_XID_FATAL=["79"], HEALTH_XID_UNKNOWN="x",
        HEALTH_RETIRED_PAGES_LIMIT=5, HEALTH_NVLINK_ERRORS_PER_ROUND=1, HEALTH_THROTTLE_SHARE=0.2,
        HEALTH_NODE_CONDITIONS_FATAL=["A"],
    )  # fmt: skip
    rules = Rules.from_settings(settings)
    assert (rules.xid_fatal, rules.xid_unknown, rules.node_conditions_fatal) == (
        frozenset({79}),
        "warning",
        frozenset({"A"}),
    )
