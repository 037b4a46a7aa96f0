"""The usage ledger partitioned by month on PostgreSQL, and its retention (billing/ledger_partitions.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection

from billing import ledger_partitions as partitions
from billing import tasks
from billing.models import UsageEntry, UsageHour
from billing.services.invoicing import draft_invoice, issue_invoice
from billing.tests import test_invoices as invoices
from billing.tests.conftest import Row, gpu_uuid
from billing.tests.test_invoices import ADMIN, lines, scrape, when

cards, may = invoices.cards, invoices.may  # the invoice tests' fixtures: acme's May on `mini`
MAY, JUNE = datetime(2026, 5, 1, tzinfo=UTC), datetime(2026, 6, 1, tzinfo=UTC)
LATER = datetime(2027, 8, 15, tzinfo=UTC)  # May and June 2026 are more than 400 days back


def partition_of_rows() -> dict[str, int]:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT tableoid::regclass::text, count(*) FROM {partitions.TABLE} GROUP BY 1")
        return dict(cursor.fetchall())


def hourly(tenant):
    return sorted(UsageHour.objects.filter(tenant=tenant).values_list("gpu_class", "hour", "gpu_us"))


def test_the_ledger_is_partitioned_by_month_and_months_are_created_ahead(db):
    assert partitions.partitioned()
    created = partitions.create_ahead(datetime(2030, 1, 20, tzinfo=UTC), ahead=2)
    assert created == [datetime(2030, m, 1, tzinfo=UTC) for m in (1, 2, 3)]
    assert partitions.create_ahead(datetime(2030, 1, 20, tzinfo=UTC), ahead=2) == []  # safe to run twice


def test_rows_of_a_month_without_a_partition_move_into_it_when_it_is_created(may):
    assert set(partition_of_rows()) == {partitions.DEFAULT}
    total = UsageEntry.objects.count()
    assert partitions.create_month(MAY)
    assert partition_of_rows() == {partitions.name_of(MAY): total}


def test_pruning_a_wholly_invoiced_month_leaves_invoices_and_usage_unchanged(may, mini):
    partitions.create_month(MAY)
    partitions.create_month(JUNE)
    may_invoice = issue_invoice(
        actor=ADMIN, invoice=draft_invoice(actor=ADMIN, tenant=may, year=2026, month=5)
    )
    scrape(mini, when(6, 2, 10), Row(gpu_uuid("h100-0", 0), pod="tenant-acme/june"))
    scrape(mini, when(6, 2, 11), Row(gpu_uuid("h100-0", 0), pod="tenant-acme/june"))
    june = draft_invoice(actor=ADMIN, tenant=may, year=2026, month=6)
    before = (lines(may_invoice), may_invoice.total, lines(june), june.total, hourly(may))

    dropped = partitions.drop_expired(LATER, timedelta(days=400))

    assert dropped == [MAY]  # June is not issued yet: its rows would still be read by its invoice
    assert partitions.name_of(MAY) not in partition_of_rows()
    assert not UsageEntry.objects.filter(hour__lt=JUNE).exists()
    may_again = draft_invoice(actor=ADMIN, tenant=may, year=2026, month=5)  # issued: the stored one
    june_again = draft_invoice(actor=ADMIN, tenant=may, year=2026, month=6)  # recomputed from the ledger
    after = (lines(may_again), may_again.total, lines(june_again), june_again.total, hourly(may))
    assert after == before


def test_a_month_with_late_rows_not_yet_invoiced_is_kept(may, mini):
    partitions.create_month(MAY)
    issue_invoice(actor=ADMIN, invoice=draft_invoice(actor=ADMIN, tenant=may, year=2026, month=5))
    late = Row(gpu_uuid("h100-0", 2), index=2, pod="tenant-acme/late")
    scrape(mini, when(5, 31, 22), late)  # after May was issued: to be billed on June's invoice
    scrape(mini, when(5, 31, 23), late)
    assert partitions.drop_expired(LATER, timedelta(days=400)) == []
    june = issue_invoice(actor=ADMIN, invoice=draft_invoice(actor=ADMIN, tenant=may, year=2026, month=6))
    assert june.lines.filter(kind="adjustment").exists()
    assert partitions.drop_expired(LATER, timedelta(days=400)) == [MAY]  # now billed: it may go


def test_a_month_inside_the_retention_is_kept(may):
    partitions.create_month(MAY)
    issue_invoice(actor=ADMIN, invoice=draft_invoice(actor=ADMIN, tenant=may, year=2026, month=5))
    assert partitions.drop_expired(datetime(2026, 7, 1, tzinfo=UTC), timedelta(days=400)) == []


def test_the_periodic_task_creates_ahead_and_honours_a_zero_retention(may, settings):
    partitions.create_month(MAY)
    issue_invoice(actor=ADMIN, invoice=draft_invoice(actor=ADMIN, tenant=may, year=2026, month=5))
    settings.LEDGER_RETENTION_DAYS = 0
    tasks.maintain_ledger()
    assert MAY in partitions.months()
    settings.LEDGER_RETENTION_DAYS = 30
    tasks.maintain_ledger()
    assert MAY not in partitions.months()
    assert partitions.month_of(datetime.now(UTC)) in partitions.months()


@pytest.fixture(autouse=True)
def _postgresql_only(db):
    if connection.vendor != "postgresql":
        pytest.skip("partitions exist on PostgreSQL only")
