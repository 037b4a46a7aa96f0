"""Money in manifests and rate cards withdrawn through the apply path: amounts out of their money type's range
are refused naming file, line, field and range; `effectiveUntil` retires a card; a pruned card is withdrawn
(deleted if no issued invoice used it, retired if one did)."""

from __future__ import annotations

import textwrap
from datetime import UTC, datetime
from decimal import Decimal

import pytest

from billing.models import Budget, Invoice, InvoiceLine, RateCard
from billing.tests.conftest import invoice_issued_with
from core.audit import Actor
from core.models import AuditEvent
from gitops import specs as state
from gitops.apply import apply
from gitops.manifests import ManifestInvalid, read_texts
from tenants.services import lifecycle

CONSOLE = Actor.console("test")

CARD = """\
apiVersion: gpucloud.io/v1alpha1
kind: RateCard
metadata: {name: list-2026}
spec:
  effectiveFrom: "2026-01-01T00:00:00Z"
  prices: {h200-141gb: "3.00"}
  tierMultipliers: {isolated: "1.25"}
"""
TENANT = """\
apiVersion: gpucloud.io/v1alpha1
kind: Tenant
metadata: {name: vision}
spec:
  hostCluster: demo
  budget: {monthly: "20000.00", currency: USD}
"""


def docs(text: str, file: str = "money.yaml"):
    return read_texts([(file, textwrap.dedent(text))])


@pytest.mark.parametrize(
    ("change", "field", "says"),
    [
        (('"3.00"', '"1000000"'), "spec.prices.h200-141gb", "1000000 is out of range"),
        (('"3.00"', '"1e30"'), "spec.prices.h200-141gb", "1e30 is out of range"),
        (('"3.00"', '"3e0"'), "spec.prices.h200-141gb", "3e0 is not written as plain digits"),
        (('"3.00"', '"3.1234567"'), "spec.prices.h200-141gb", "has too many decimal places"),
        (
            ('"1.25"', '"1e30"'),
            "spec.tierMultipliers.isolated",
            "a trust-tier multiplier is a decimal number",
        ),
    ],
)
def test_a_rate_card_manifest_out_of_range_is_refused_naming_line_field_and_range(
    demo_fleet, change, field, says
):
    with pytest.raises(ManifestInvalid) as refused:
        apply(docs(CARD.replace(*change)), actor=CONSOLE, source="cards")
    (problem,) = refused.value.problems
    assert (problem.file, problem.field) == ("money.yaml", field)
    assert problem.line is not None
    assert says in problem.reason
    assert "from 0 to" in problem.reason
    assert not RateCard.objects.exists()


@pytest.mark.parametrize(
    ("monthly", "says"),
    [("1e30", "1e30 is out of range"), ("0", "0 is out of range")],
)
def test_a_budget_out_of_range_in_a_manifest_is_refused_and_nothing_is_written(demo_fleet, monthly, says):
    with pytest.raises(ManifestInvalid) as refused:
        apply(docs(TENANT.replace('"20000.00"', f'"{monthly}"')), actor=CONSOLE, source="tenants")
    (problem,) = refused.value.problems
    assert problem.field == "spec.budget" or problem.field == "spec.budget.monthly"
    assert says in problem.reason
    assert "a monthly budget is a decimal number from 0.01" in problem.reason
    assert not Budget.objects.exists()


def test_a_budget_of_many_digits_in_a_manifest_is_kept_exactly(demo_fleet):
    apply(docs(TENANT.replace('"20000.00"', '"12345678901234.12"')), actor=CONSOLE, source="tenants")
    assert Budget.objects.get().monthly_amount == Decimal("12345678901234.12")


def _used(card: RateCard) -> None:
    """An issued invoice of January with a line at the card's prices."""
    tenant = lifecycle.create_tenant(actor=CONSOLE, slug="acme")
    invoice = Invoice.objects.create(
        tenant=tenant, period_start=datetime(2026, 1, 1, tzinfo=UTC),
        period_end=datetime(2026, 2, 1, tzinfo=UTC), state=Invoice.State.ISSUED, trust_tier="standard",
    )  # fmt: skip
    InvoiceLine.objects.create(
        invoice=invoice, kind="usage", gpu_class="h200-141gb", description="usage",
        charge_start=invoice.period_start, charge_end=invoice.period_end, gpu_hours=1, list_unit_price=3,
        unit_price=3, list_amount=3, amount=3, currency="USD", rate_card_version=card.version,
    )  # fmt: skip


def test_effective_until_alone_retires_the_newest_version_and_export_keeps_it(demo_fleet):
    apply(docs(CARD), actor=CONSOLE, source="cards")
    retiring = CARD + '  effectiveUntil: "2026-07-01T00:00:00Z"\n'

    result = apply(docs(retiring), actor=CONSOLE, source="cards")

    (card,) = RateCard.objects.all()  # no new version: the same card, ended
    assert card.effective_until == datetime(2026, 7, 1, tzinfo=UTC)
    assert [str(c) for c in result.changes] == [
        "~ RateCard list-2026\n  + effectiveUntil: '2026-07-01T00:00:00Z'"
    ]
    event = AuditEvent.objects.get(action="rate_card.retire")
    assert event.actor_label == "console:test"
    assert apply(docs(retiring), actor=CONSOLE, source="cards").changes == []
    exported = [d for d in state.export() if d["kind"] == "RateCard"]
    assert exported[0]["spec"]["effectiveUntil"] == "2026-07-01T00:00:00Z"


def test_a_pruned_card_is_deleted_when_unused_and_retired_when_an_issued_invoice_used_it(demo_fleet):
    apply(docs(CARD), actor=CONSOLE, source="cards")
    apply(docs(CARD.replace("list-2026", "list-2027")), actor=CONSOLE, source="more")
    used = RateCard.objects.get(name="list-2027")
    invoice_issued_with(used)

    pruned = apply([], actor=CONSOLE, source="cards", prune=True)
    assert [str(c) for c in pruned.changes] == [
        "- RateCard list-2026 (prune: delete, or retire if issued invoices used it)"
    ]
    assert not RateCard.objects.filter(name="list-2026").exists()

    apply([], actor=CONSOLE, source="more", prune=True)
    used.refresh_from_db()
    assert used.effective_until is not None
    assert used.effective_until >= datetime(2026, 2, 1, tzinfo=UTC)
    assert list(
        AuditEvent.objects.filter(action__startswith="rate_card.")
        .order_by("id")
        .values_list("action", flat=True)
    ) == [
        "rate_card.create",
        "rate_card.create",
        "rate_card.delete",
        "rate_card.retire",
    ]


def test_a_retirement_the_service_refuses_names_the_manifests_field_and_line(demo_fleet):
    apply(docs(CARD), actor=CONSOLE, source="cards")
    with pytest.raises(ManifestInvalid) as refused:
        apply(docs(CARD + '  effectiveUntil: "2025-07-01T00:00:00Z"\n'), actor=CONSOLE, source="cards")
    (problem,) = refused.value.problems
    assert (problem.field, problem.line) == ("spec.effectiveUntil", 8)
    assert "cannot end before it began" in problem.reason
    assert RateCard.objects.get().effective_until is None
