"""The ledger writer: ledger rows appended, their hourly sums added, the nodes' metering states saved.

Ingest (`billing.services.ingest`) integrates a round and hands the rows here, inside its transaction. The
SQL is written by hand on PostgreSQL (COPY, one INSERT … ON CONFLICT, one UPDATE … FROM VALUES): a
10,000-GPU round writes about 14,000 rows, and Django's per-instance path cost more than parsing the round.
On SQLite (the embedded default, small fleets) the ORM does it row by row.
"""

from __future__ import annotations

import json
from typing import Any

from django.db import connection
from django.db.models import F

from billing.models import MeterState, UsageEntry, UsageHour

LEDGER_COLUMNS = (
    "scrape_id", "host_cluster_id", "tenant_id", "gpu_class", "node", "device", "namespace", "pod", "hour",
    "gpu_us", "util_gpu_us", "millijoules", "recorded_at",
)  # fmt: skip


def append(rows: list[tuple[Any, ...]]) -> None:
    """Append ledger rows laid out as LEDGER_COLUMNS. On PostgreSQL with COPY: Django's model instances and
    per-field preparation in bulk_create cost more than parsing the round."""
    if connection.vendor != "postgresql":
        UsageEntry.objects.bulk_create(
            [UsageEntry(**dict(zip(LEDGER_COLUMNS, row, strict=True))) for row in rows], batch_size=5000
        )
        return
    columns = ", ".join(LEDGER_COLUMNS)
    with (
        connection.cursor() as cursor,
        cursor.cursor.copy(f"COPY {UsageEntry._meta.db_table} ({columns}) FROM STDIN") as copy,
    ):
        for row in rows:
            copy.write_row(row)


HOUR_KEY = ("host_cluster_id", "node", "device", "namespace", "pod", "gpu_class", "hour")
HOUR_SUMS = ("gpu_us", "util_gpu_us", "millijoules")


def add_to_hours(scrape_ids: list[int], rows: list[tuple[Any, ...]]) -> None:
    """Add this call's ledger rows to the hourly sums: on PostgreSQL one INSERT … ON CONFLICT DO UPDATE."""
    if not rows:
        return
    if connection.vendor != "postgresql":
        _add_to_hours_slowly(rows)
        return
    key, sums = ", ".join(HOUR_KEY), ", ".join(HOUR_SUMS)
    added = ", ".join(f"{c} = h.{c} + EXCLUDED.{c}" for c in HOUR_SUMS)
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {UsageHour._meta.db_table} AS h ({key}, tenant_id, {sums}) "
            f"SELECT {key}, max(tenant_id), {', '.join(f'sum({c})' for c in HOUR_SUMS)} "
            f"FROM {UsageEntry._meta.db_table} WHERE scrape_id = ANY(%s) GROUP BY {key} "
            f"ON CONFLICT ({key}) DO UPDATE SET {added}",
            [scrape_ids],
        )


def _add_to_hours_slowly(rows: list[tuple[Any, ...]]) -> None:
    """The same for SQLite (the embedded default, small fleets): one upsert per cell."""
    position = {c: i for i, c in enumerate(LEDGER_COLUMNS)}
    for row in rows:
        key = {c: row[position[c]] for c in HOUR_KEY}
        values = {c: row[position[c]] for c in HOUR_SUMS}
        updated = UsageHour.objects.filter(**key).update(**{c: F(c) + v for c, v in values.items()})
        if not updated:
            UsageHour.objects.create(tenant_id=row[position["tenant_id"]], **key, **values)


def save_states(states: list[MeterState]) -> None:
    """Write the nodes' new states and the memory their last scrape showed. On PostgreSQL one UPDATE … FROM
    (VALUES …) per thousand nodes: Django's bulk_update builds a CASE per row and took most of a 10,000-GPU
    round."""
    if connection.vendor != "postgresql":
        MeterState.objects.bulk_update(states, ["state", "memory"], batch_size=500)
        return
    table = MeterState._meta.db_table
    with connection.cursor() as cursor:
        for i in range(0, len(states), 1000):
            batch = states[i : i + 1000]
            values = ", ".join(["(%s, %s::jsonb, %s::jsonb)"] * len(batch))
            params: list[Any] = []
            for row in batch:
                params += [row.pk, json.dumps(row.state), json.dumps(row.memory)]
            cursor.execute(
                f"UPDATE {table} AS m SET state = v.state, memory = v.memory, updated_at = now() "
                f"FROM (VALUES {values}) AS v(id, state, memory) WHERE m.id = v.id",
                params,
            )
