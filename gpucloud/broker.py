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

Both brokers, this one and Redis (`RedisTransport`), screen every message as it comes off the queue: one
that is not a kombu message (`redis-cli LPUSH reconcile garbage`, a truncated write) is logged and set aside
instead of reaching kombu, whose decoding error would escape the worker's event loop and stop the worker
("Unrecoverable error"), and every restarted worker again on the next such message. Redis keeps the last
DEAD_LETTERS of them, raw, in the list `gpucloud-dead-letters` for a look (`redis-cli LRANGE
gpucloud-dead-letters 0 -1`). What a message carries (its task, its arguments) is Celery's to judge: an
unknown task or a body it cannot decode is logged and rejected by Celery itself.
"""

from __future__ import annotations

import functools
import logging
import sqlite3
import time
from queue import Empty
from typing import Any

from kombu.transport import redis, sqlalchemy
from kombu.utils.encoding import bytes_to_str
from kombu.utils.json import loads
from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError

log = logging.getLogger(__name__)
BUSY_TIMEOUT_MS = 20_000
SWEEP_EVERY = 60.0
DEAD_LETTERS = 1000  # poison messages Redis keeps for a look, the newest first
DEAD_LETTER_LIST = "gpucloud-dead-letters"


class PoisonMessage(Exception):
    """Something on a queue that is not a message kombu can hand to Celery; the text says why."""


def check_envelope(payload: Any, channel: Any) -> Any:
    """The decoded message if kombu's channel can build a Message of it, else PoisonMessage.

    kombu reads `properties`, its `delivery_tag` and `delivery_info` (the exchange and routing key it keeps
    beside an unacknowledged message) and decodes the body (base64) while it takes the message, outside
    anything Celery guards: each of those failing would stop the worker, or drop its connection."""
    if not isinstance(payload, dict):
        raise PoisonMessage(f"a JSON {type(payload).__name__}, not a message object")
    properties = payload.get("properties")
    if not isinstance(properties, dict) or not isinstance(properties.get("delivery_tag"), str):
        raise PoisonMessage("no properties.delivery_tag")
    delivery = properties.get("delivery_info")
    if not isinstance(delivery, dict) or not {"exchange", "routing_key"} <= delivery.keys():
        raise PoisonMessage("no properties.delivery_info with an exchange and a routing key")
    if not isinstance(payload.get("headers") or {}, dict):
        raise PoisonMessage("headers is not an object")
    if payload.get("body"):
        try:
            channel.decode_body(payload["body"], properties.get("body_encoding"))
        except Exception as exc:  # whatever the codec raises for bytes from the queue
            raise PoisonMessage(f"the body cannot be decoded: {exc}") from None
    return payload


def _decode(raw: bytes, channel: Any) -> Any:
    try:
        payload = loads(bytes_to_str(raw))
    except Exception as exc:  # JSONDecodeError, UnicodeDecodeError, kombu's object hooks: all poison
        raise PoisonMessage(f"not JSON: {exc}") from None
    return check_envelope(payload, channel)


def _report(queue: str, reason: PoisonMessage, raw: bytes | None) -> None:
    # The head of the message only: it is whatever someone pushed, and may be large.
    head = f"; {len(raw)} bytes, starting {raw[:120]!r}" if raw is not None else ""
    log.error("dropped a message on queue %r that is not a task message: %s%s", queue, reason, head)


def _tune(dbapi_connection: sqlite3.Connection, _record: Any) -> None:
    # The busy timeout comes first: switching to WAL needs a moment of exclusive access.
    dbapi_connection.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    dbapi_connection.execute("PRAGMA journal_mode = WAL")
    # In WAL mode NORMAL loses no committed message on a process crash, only on a power cut.
    dbapi_connection.execute("PRAGMA synchronous = NORMAL")


class Channel(sqlalchemy.Channel):
    swept_at = 0.0

    def _engine_from_config(self) -> Engine:
        # kombu leaves its transports' hooks unannotated (here and in _get, _get_client below)
        engine: Engine = super()._engine_from_config()  # type: ignore[no-untyped-call]
        event.listen(engine, "connect", _tune)
        return engine

    def _get(self, queue: str, timeout: Any = None) -> Any:
        if time.monotonic() - self.swept_at >= SWEEP_EVERY:
            self.sweep()
        # kombu has marked the row delivered before it decodes it: a poison row is dropped by the next sweep.
        try:
            return check_envelope(super()._get(queue), self)  # type: ignore[no-untyped-call]
        except ValueError as exc:  # kombu's JSON decoding of the row
            _report(queue, PoisonMessage(f"not JSON: {exc}"), None)
        except PoisonMessage as exc:
            _report(queue, exc, None)
        raise Empty()

    def _get_or_create(self, queue: str) -> Any:
        """kombu's, made safe between processes. kombu checks for the queue's row, then inserts it, under a
        lock of its own process only: two processes creating one queue at once (a worker declaring its
        queues as the web process sends the first task) both insert, and the loser's IntegrityError stops its
        worker ("Unrecoverable error"). The loser now takes the winner's row."""
        try:
            return super()._get_or_create(queue)  # type: ignore[no-untyped-call]
        except IntegrityError:
            self.session.rollback()
            found = self.session.query(self.queue_cls).filter(self.queue_cls.name == queue).first()
            if found is None:
                raise
            return found

    def sweep(self) -> int:
        """Delete the messages already delivered; kombu never reads them again (a restore sends a copy)."""
        self.swept_at = time.monotonic()
        delivered = self.session.query(self.message_cls).filter(self.message_cls.visible.is_(False))
        count: int = delivered.delete(synchronize_session=False)
        self.session.commit()
        return count


class Transport(sqlalchemy.Transport):
    Channel = Channel
    polling_interval = 0.05


class _ScreenedRedis:
    """A redis-py client whose BRPOP and RPOP replies (the messages kombu takes off a queue) pass `screen`
    first; a reply it turns to None reads as an empty queue."""

    def __init__(self, *args: Any, screen: Any, **kwargs: Any) -> None:
        self._screen = screen
        super().__init__(*args, **kwargs)

    def parse_response(self, connection: Any, command_name: Any, **options: Any) -> Any:
        response = super().parse_response(connection, command_name, **options)  # type: ignore[misc]
        if response and command_name in ("BRPOP", "RPOP"):
            return self._screen(command_name, response)
        return response


class RedisChannel(redis.Channel):
    def _get_client(self) -> Any:
        client: Any = super()._get_client()  # type: ignore[no-untyped-call]  # kombu: unannotated
        keywords: dict[str, Any] = {}
        if isinstance(client, functools.partial):  # kombu's client with a global key prefix
            client, keywords = client.func, client.keywords
        screened = type(f"Screened{client.__name__}", (_ScreenedRedis, client), {})
        return functools.partial(screened, screen=self._screen, **keywords)

    def _screen(self, command: str, response: Any) -> Any:
        """The reply if it carries a message kombu can read; else the message is reported, dead-lettered, and
        the reply is None (BRPOP: nothing came; RPOP: that queue is empty this time)."""
        queue, raw = response if command == "BRPOP" else (b"", response)
        try:
            _decode(raw, self)
        except PoisonMessage as exc:
            _report(bytes_to_str(queue).rsplit(self.sep, 1)[0], exc, raw)
            self._dead_letter(raw)
            return None
        return response

    def _dead_letter(self, raw: bytes) -> None:
        try:
            with self.conn_or_acquire() as client, client.pipeline() as pipe:
                pipe.lpush(DEAD_LETTER_LIST, raw).ltrim(DEAD_LETTER_LIST, 0, DEAD_LETTERS - 1).execute()
        except Exception as exc:  # keeping it is a courtesy: losing it must not stop the worker either
            log.warning("could not keep a poison message in %s: %s", DEAD_LETTER_LIST, exc)


class RedisTransport(redis.Transport):
    """kombu's Redis transport with its messages screened (`RedisChannel`); CELERY_BROKER_URL=redis://…"""

    Channel = RedisChannel
