"""The usage ledger becomes a table partitioned by month on PostgreSQL (billing/ledger_partitions.py).

Same columns, indexes and foreign keys; the primary key becomes (id, hour), as PostgreSQL requires the
partition key in it, and ids come from a sequence (PostgreSQL 15 has no identity columns on partitioned
tables). Rows are copied over in this migration's transaction: on a large ledger, plan the downtime (the copy
runs at roughly the speed of an INSERT … SELECT). SQLite is left as it is.
"""

from datetime import UTC, datetime

from django.db import migrations
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.backends.utils import CursorWrapper
from django.db.migrations.state import StateApps

TABLE = "billing_usageentry"
OLD = f"{TABLE}_unpartitioned"


def add_months(month: datetime, count: int) -> datetime:
    index = month.year * 12 + month.month - 1 + count
    return datetime(index // 12, index % 12 + 1, 1, tzinfo=UTC)


def partition(cursor: CursorWrapper, month: datetime) -> None:
    start, end = month.isoformat(), add_months(month, 1).isoformat()
    cursor.execute(
        f"CREATE TABLE {TABLE}_{month:%Y%m} PARTITION OF {TABLE} FOR VALUES FROM ('{start}') TO ('{end}')"
    )


def forwards(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        # Going back leaves the table partitioned (the model fits both), so coming forward again is a no-op.
        cursor.execute("SELECT 1 FROM pg_partitioned_table WHERE partrelid = %s::regclass", [TABLE])
        if cursor.fetchone():
            return
        cursor.execute(
            "SELECT pg_get_indexdef(indexrelid) FROM pg_index WHERE indrelid = %s::regclass AND NOT indisprimary",
            [TABLE],
        )
        indexes = [row[0] for row in cursor.fetchall()]
        cursor.execute(
            "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = %s::regclass "
            "AND contype = 'f'",
            [TABLE],
        )
        foreign_keys = cursor.fetchall()
        cursor.execute(f"ALTER TABLE {TABLE} RENAME TO {OLD}")
        cursor.execute(f"CREATE TABLE {TABLE} (LIKE {OLD} INCLUDING DEFAULTS) PARTITION BY RANGE (hour)")
        cursor.execute(f"CREATE SEQUENCE {TABLE}_id_by_month_seq OWNED BY {TABLE}.id")
        cursor.execute(f"ALTER TABLE {TABLE} ALTER COLUMN id SET DEFAULT nextval('{TABLE}_id_by_month_seq')")
        cursor.execute(f"ALTER TABLE {TABLE} ADD CONSTRAINT {TABLE}_pkey_id_hour PRIMARY KEY (id, hour)")
        cursor.execute(f"CREATE TABLE {TABLE}_default PARTITION OF {TABLE} DEFAULT")
        cursor.execute(f"SELECT DISTINCT date_trunc('month', hour AT TIME ZONE 'UTC') FROM {OLD}")
        now = datetime.now(UTC)
        this_month = datetime(now.year, now.month, 1, tzinfo=UTC)
        months = {row[0].replace(tzinfo=UTC) for row in cursor.fetchall()}
        months |= {add_months(this_month, n) for n in range(4)}
        for month in sorted(months):
            partition(cursor, month)
        cursor.execute(f"INSERT INTO {TABLE} SELECT * FROM {OLD}")
        cursor.execute(
            f"SELECT setval('{TABLE}_id_by_month_seq', coalesce((SELECT max(id) FROM {OLD}), 0) + 1, false)"
        )
        cursor.execute(f"DROP TABLE {OLD}")
        for definition in indexes:  # same names, so later migrations find them
            cursor.execute(
                definition.replace(f" ON public.{OLD} ", f" ON {TABLE} ").replace(
                    f" ON {OLD} ", f" ON {TABLE} "
                )
            )
        for name, definition in foreign_keys:
            cursor.execute(f"ALTER TABLE {TABLE} ADD CONSTRAINT {name} {definition}")


class Migration(migrations.Migration):
    dependencies = [("billing", "0003_auth_encrypt_webhook_url")]

    operations = [migrations.RunPython(forwards, migrations.RunPython.noop, elidable=False)]
