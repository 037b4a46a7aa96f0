"""`terraform destroy` of rate cards, with the real terraform against a live gpucloud: a card no issued
invoice used is deleted, a used one retired, so no platform-wide price is left behind as if still wanted."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from billing.models import Invoice, InvoiceLine, RateCard
from billing.tests.conftest import invoice_issued_with
from core.audit import Actor
from core.models import AuditEvent
from tenants.services import lifecycle
from terraform_provider.tests.conftest import PROVIDER, Terraform

pytestmark = pytest.mark.worker

CARDS = (
    PROVIDER
    + """
    resource "gpucloud_rate_card" "draft" {
      effective_from = "2027-01-01T00:00:00Z"
      prices         = { "h200-141gb" = 4.5 }
    }
    resource "gpucloud_rate_card" "billed" {
      effective_from = "2026-01-01T00:00:00Z"
      prices         = { "h200-141gb" = 3.25 }
    }
    """
)


def issued_with(card: RateCard) -> None:
    """January's invoice of a tenant, issued, with a line at the card's prices."""
    tenant = lifecycle.create_tenant(actor=Actor.console("tests"), slug="acme")
    invoice = Invoice.objects.create(
        tenant=tenant, period_start=datetime(2026, 1, 1, tzinfo=UTC),
        period_end=datetime(2026, 2, 1, tzinfo=UTC), state=Invoice.State.ISSUED, trust_tier="standard",
    )  # fmt: skip
    InvoiceLine.objects.create(
        invoice=invoice, kind="usage", gpu_class="h200-141gb", description="usage",
        charge_start=invoice.period_start, charge_end=invoice.period_end, gpu_hours=1, list_unit_price=3,
        unit_price=3, list_amount=3, amount=3, currency="USD", rate_card_version=card.version,
    )  # fmt: skip


def test_destroy_deletes_an_unused_card_and_retires_one_an_issued_invoice_used(terraform: Terraform) -> None:
    terraform.write(CARDS)
    terraform.run("init")
    terraform.apply()
    draft = RateCard.objects.get(effective_from=datetime(2027, 1, 1, tzinfo=UTC))
    billed = RateCard.objects.get(effective_from=datetime(2026, 1, 1, tzinfo=UTC))
    invoice_issued_with(billed)
    assert "No changes." in terraform.plan(expect=0)

    destroyed = terraform.run("destroy", "-auto-approve")

    assert "Destroy complete! Resources: 2 destroyed." in destroyed.stdout
    assert not RateCard.objects.filter(pk=draft.pk).exists()
    billed.refresh_from_db()
    assert billed.effective_until is not None  # kept for the invoice, no longer in force
    assert f"rate card {billed.public_id} (version {billed.version}) is retired, not deleted" in (
        " ".join((destroyed.stdout + destroyed.stderr).split())
    )
    actions = AuditEvent.objects.filter(action__in=["rate_card.delete", "rate_card.retire"])
    assert sorted(actions.values_list("action", "object_id")) == [
        ("rate_card.delete", draft.public_id),
        ("rate_card.retire", billed.public_id),
    ]
