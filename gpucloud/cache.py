"""The shared cache's database backend: what rate limits and sign-in lock-outs count in when no Redis is set.

Counts must be shared by every process that answers requests (gunicorn's workers, several web pods): a cache
of each process's own lets each count to the limit by itself. Django's database cache is shared, but its
`incr` reads the value and writes it back in two steps, so two processes counting at once lose a count.
This one counts in one step: the row is locked (PostgreSQL `SELECT … FOR UPDATE`; SQLite's IMMEDIATE
transactions hold the write lock from their start) from the read to the write.
"""

from __future__ import annotations

import base64
import pickle
from typing import Any

from django.core.cache.backends import db
from django.db import connections, router, transaction
from django.utils.timezone import now

TABLE = "gpucloud_cache"  # made by the migration tenants 0007; `createcachetable` would make the same


class DatabaseCache(db.DatabaseCache):
    """Django's database cache whose `incr` (and `decr`) is one atomic step."""

    def incr(self, key: Any, delta: int = 1, version: int | None = None) -> Any:
        key = self.make_and_validate_key(key, version=version)
        table: str = self._table  # type: ignore[attr-defined]  # BaseDatabaseCache's, untyped
        alias = router.db_for_write(self.cache_model_class)
        connection = connections[alias]
        name = connection.ops.quote_name
        lock = " FOR UPDATE" if connection.features.has_select_for_update else ""
        select = (
            f"SELECT {name('value')} FROM {name(table)} "
            f"WHERE {name('cache_key')} = %s AND {name('expires')} > %s{lock}"
        )
        update = f"UPDATE {name(table)} SET {name('value')} = %s WHERE {name('cache_key')} = %s"
        with transaction.atomic(using=alias), connection.cursor() as cursor:
            cursor.execute(select, [key, connection.ops.adapt_datetimefield_value(now())])
            row = cursor.fetchone()
            if row is None:
                raise ValueError(f"Key '{key}' not found.")  # as every Django cache says it
            value = pickle.loads(base64.b64decode(connection.ops.process_clob(row[0]).encode())) + delta
            stored = base64.b64encode(pickle.dumps(value, self.pickle_protocol)).decode("latin1")
            cursor.execute(update, [stored, key])
        return value
