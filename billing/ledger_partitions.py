"""The usage ledger partitioned by month on PostgreSQL, and its retention (docs/billing.md, "Ledger growth").

`billing_usageentry` is a range-partitioned table on `hour` (migration 0004): one partition per month, named
`billing_usageentry_YYYYMM`, and a default partition that catches rows of a month without one. The periodic
task `billing.maintain_ledger` creates the coming months ahead and drops months past the retention.

A month is dropped only when nothing will read its rows again: usage queries and budgets read the hourly sums
(`UsageHour`), which keep every hour; invoices read the ledger, so a month goes only once every tenant's rows
in it are on an issued invoice — its month issued and its rows at or below the tenant's last issued watermark
(so late rows, billed as adjustments on a later invoice, are billed too). Issued invoices keep their lines.
SQLite (the embedded default) has no partitions: nothing here applies to it.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

from django.db import connection, transaction

from billing.models import Invoice, UsageEntry

log = logging.getLogger(__name__)
TABLE = UsageEntry._meta.db_table
DEFAULT = f"{TABLE}_default"
INVOICES = Invoice._meta.db_table


def month_of(moment: datetime) -> datetime:
    moment = moment.astimezone(UTC)
    return datetime(moment.year, moment.month, 1, tzinfo=UTC)


def add_months(month: datetime, count: int) -> datetime:
    index = month.year * 12 + month.month - 1 + count
    return datetime(index // 12, index % 12 + 1, 1, tzinfo=UTC)


def name_of(month: datetime) -> str:
    return f"{TABLE}_{month:%Y%m}"


def partitioned() -> bool:
    if connection.vendor != "postgresql":
        return False
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_partitioned_table WHERE partrelid = %s::regclass", [TABLE])
        return cursor.fetchone() is not None


def months() -> list[datetime]:
    """The months that have a partition of their own, oldest first."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = %s::regclass",
            [TABLE],
        )
        names = [row[0] for row in cursor.fetchall() if row[0] != DEFAULT]
    return sorted(datetime.strptime(name[-6:], "%Y%m").replace(tzinfo=UTC) for name in names)


def create_month(month: datetime) -> bool:
    """Give `month` a partition; rows of it that landed in the default partition move into it. True if new."""
    if month in months():
        return False
    name, start, end = name_of(month), month.isoformat(), add_months(month, 1).isoformat()
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"CREATE TABLE {name} (LIKE {TABLE} INCLUDING DEFAULTS)")
        # The default partition may hold rows of this month (late samples, a month created late): the
        # partition cannot be attached while it does, so they move first, in the same transaction.
        cursor.execute(
            f"WITH moved AS (DELETE FROM {DEFAULT} WHERE hour >= %s AND hour < %s RETURNING *) "
            f"INSERT INTO {name} SELECT * FROM moved",
            [start, end],
        )
        cursor.execute(
            f"ALTER TABLE {TABLE} ATTACH PARTITION {name} FOR VALUES FROM ('{start}') TO ('{end}')"
        )
    return True


def create_ahead(now: datetime, ahead: int = 3) -> list[datetime]:
    """This month's partition and the next `ahead` months'; the ones created."""
    if not partitioned():
        return []
    wanted = [add_months(month_of(now), n) for n in range(ahead + 1)]
    return [month for month in wanted if create_month(month)]


def _unbilled_rows(month: datetime) -> int:
    """Tenant rows of the month not (yet) on an issued invoice; platform rows (no tenant) are never billed."""
    issued = Invoice.State.ISSUED
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT count(*) FROM {name_of(month)} e WHERE e.tenant_id IS NOT NULL AND NOT ("
            f"  EXISTS (SELECT 1 FROM {INVOICES} i WHERE i.tenant_id = e.tenant_id AND i.state = %s"
            "          AND i.period_start <= e.hour AND e.hour < i.period_end)"
            f"  AND e.id <= (SELECT max(i.ledger_watermark) FROM {INVOICES} i"
            f"               WHERE i.tenant_id = e.tenant_id AND i.state = %s))",
            [issued, issued],
        )
        return int(cursor.fetchone()[0])


def drop_expired(now: datetime, retention: timedelta) -> list[datetime]:
    """Drop the months that ended more than `retention` ago and are wholly billed; the ones dropped."""
    if not partitioned():
        return []
    horizon, dropped = now - retention, []
    for month in months():
        if add_months(month, 1) > horizon:
            break
        unbilled = _unbilled_rows(month)
        if unbilled:
            log.warning(
                "ledger month past retention kept: rows not on an issued invoice",
                extra={"month": f"{month:%Y-%m}", "rows": unbilled},
            )
            continue
        with transaction.atomic(), connection.cursor() as cursor:
            # Deferred foreign-key checks of rows written earlier in this transaction must run before the
            # table can go (PostgreSQL refuses to drop a table with pending trigger events).
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
            cursor.execute(f"ALTER TABLE {TABLE} DETACH PARTITION {name_of(month)}")
            cursor.execute(f"DROP TABLE {name_of(month)}")
        dropped.append(month)
    return dropped
