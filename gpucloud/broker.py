"""The embedded default's task broker: one SQLite file under var/, shared by web, worker and beat.

kombu's SQLAlchemy transport, which takes each message in a write transaction (`BEGIN IMMEDIATE`), so
several processes can share the file; kombu's file-system transport cannot (two readers of one message file
race, and the loser's worker dies of a JSONDecodeError). Two things the stock transport cannot be told through
`broker_transport_options`, because it hands every option to `create_engine()`:

- how often it polls: 50 ms, so a change reaches the worker well within a second (the default is 1 s);
- how it uses SQLite: write-ahead logging, so readers do not wait for the writer, and a busy timeout, so a
  process that finds the file locked waits its turn instead of failing with "database is locked".

It has no fan-out exchanges, so no remote control (`celery inspect`, `celery control`): nothing in gpucloud
uses it, and `/metrics` reads the workers' counters from PROMETHEUS_MULTIPROC_DIR instead.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from kombu.transport import sqlalchemy
from sqlalchemy import event
from sqlalchemy.engine import Engine

BUSY_TIMEOUT_MS = 20_000


def _tune(dbapi_connection: sqlite3.Connection, _record: Any) -> None:
    # The busy timeout comes first: switching to WAL needs a moment of exclusive access.
    dbapi_connection.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    dbapi_connection.execute("PRAGMA journal_mode = WAL")
    # In WAL mode NORMAL loses no committed message on a process crash, only on a power cut.
    dbapi_connection.execute("PRAGMA synchronous = NORMAL")


class Channel(sqlalchemy.Channel):
    def _engine_from_config(self) -> Engine:
        engine = super()._engine_from_config()
        event.listen(engine, "connect", _tune)
        return engine


class Transport(sqlalchemy.Transport):
    Channel = Channel
    polling_interval = 0.05
