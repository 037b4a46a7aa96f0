"""The embedded default's task broker: one SQLite file under var/, shared by web, worker and beat.

kombu's SQLAlchemy transport, which takes each message in a write transaction (`BEGIN IMMEDIATE`), so
several processes can share the file; kombu's file-system transport cannot (two readers of one message file
race, and the loser's worker dies of a JSONDecodeError). Two things the stock transport cannot be told through
`broker_transport_options`, because it hands every option to `create_engine()`:

- how often it polls: 50 ms, so a change reaches the worker well within a second (the default is 1 s);
- how it uses SQLite: write-ahead logging, so readers do not wait for the writer, and a busy timeout, so a
  process that finds the file locked waits its turn instead of failing with "database is locked".

kombu keeps every delivered message in the table, marked invisible: beat alone sends thousands a day. The
worker's channel deletes them once a minute, so the file stays small.

It has no fan-out exchanges, so no remote control (`celery inspect`, `celery control`): nothing in gpucloud
uses it, and `/metrics` reads the workers' counters from PROMETHEUS_MULTIPROC_DIR instead.
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any

from kombu.transport import sqlalchemy
from sqlalchemy import event
from sqlalchemy.engine import Engine

BUSY_TIMEOUT_MS = 20_000
SWEEP_EVERY = 60.0


def _tune(dbapi_connection: sqlite3.Connection, _record: Any) -> None:
    # The busy timeout comes first: switching to WAL needs a moment of exclusive access.
    dbapi_connection.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    dbapi_connection.execute("PRAGMA journal_mode = WAL")
    # In WAL mode NORMAL loses no committed message on a process crash, only on a power cut.
    dbapi_connection.execute("PRAGMA synchronous = NORMAL")


class Channel(sqlalchemy.Channel):
    swept_at = 0.0

    def _engine_from_config(self) -> Engine:
        engine = super()._engine_from_config()
        event.listen(engine, "connect", _tune)
        return engine

    def _get(self, queue: str, timeout: Any = None) -> Any:
        if time.monotonic() - self.swept_at >= SWEEP_EVERY:
            self.sweep()
        return super()._get(queue)

    def sweep(self) -> int:
        """Delete the messages already delivered; kombu never reads them again (a restore sends a copy)."""
        self.swept_at = time.monotonic()
        delivered = self.session.query(self.message_cls).filter(self.message_cls.visible.is_(False))
        count = delivered.delete(synchronize_session=False)
        self.session.commit()
        return count


class Transport(sqlalchemy.Transport):
    Channel = Channel
    polling_interval = 0.05
