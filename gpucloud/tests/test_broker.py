"""The brokers (gpucloud/broker.py): the embedded SQLite file shared by several processes and kept small, and
what a worker on Redis does with a message that is not one."""

from __future__ import annotations

import base64
import json
import multiprocessing
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import redis
from kombu.connection import Connection
from sqlalchemy.orm import Query

from gpucloud import broker
from gpucloud import celery as names
from gpucloud.celery import app
from gpucloud.tests.test_cli import gpucloud, process_env, stop, wait_until

TRANSPORT = "gpucloud.broker:Transport"


def connect(path: Path) -> Connection:
    return Connection(f"sqlite:///{path}", transport=TRANSPORT)


def consume(path: str, results: multiprocessing.Queue[list[Any]]) -> None:
    taken = []
    with connect(Path(path)) as conn:
        queue = conn.SimpleQueue("work")
        while True:
            try:
                message = queue.get(timeout=1.0)
            except queue.Empty:
                break
            taken.append(message.payload["n"])
            message.ack()
    results.put(taken)


def test_four_consumer_processes_take_each_of_400_messages_exactly_once(tmp_path):
    path = tmp_path / "broker.sqlite3"
    with connect(path) as conn:
        producer = conn.SimpleQueue("work")
        for n in range(400):
            producer.put({"n": n})
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    consumers = [context.Process(target=consume, args=(str(path), results)) for _ in range(4)]
    for process in consumers:
        process.start()
    taken = [n for _ in consumers for n in results.get(timeout=60)]
    for process in consumers:
        process.join(timeout=10)

    assert sorted(taken) == list(range(400))
    assert [process.exitcode for process in consumers] == [0, 0, 0, 0]


def test_the_broker_file_is_in_wal_mode_and_polled_every_50_ms(tmp_path):
    path = tmp_path / "broker.sqlite3"
    with connect(path) as conn:
        conn.SimpleQueue("work").put({"n": 1})
        assert conn.transport.polling_interval == 0.05
    assert sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone() == ("wal",)


def test_delivered_messages_are_swept_from_the_file(tmp_path):
    path = tmp_path / "broker.sqlite3"
    with connect(path) as conn:
        queue = conn.SimpleQueue("work")
        for n in range(5):
            queue.put({"n": n})
        for _ in range(3):
            queue.get(timeout=1).ack()
        assert isinstance(conn.default_channel, broker.Channel)

        assert conn.default_channel.sweep() == 3

    rows = sqlite3.connect(path).execute("SELECT count(*) FROM kombu_message").fetchone()
    assert rows == (2,)  # the two not yet delivered


# --- What a worker does with something on its queue that is not a task message ----------------------------

NOT_MESSAGES = [
    b"garbage-not-json",
    b"\xff\xfe not utf-8",
    b"[1, 2]",
    b'{"properties": 5}',
    b'{"body": "x", "properties": {"delivery_tag": "t"}}',
    b'{"body": "x", "headers": 5, "properties": {"delivery_tag": "t", "delivery_info": {}}}',
]
DELIVERY = {"delivery_tag": "t", "delivery_info": {"exchange": "", "routing_key": "default"}}
NOT_MESSAGES += [
    json.dumps({"body": "x", "headers": 5, "properties": DELIVERY}).encode(),
    json.dumps({"body": "abc", "properties": DELIVERY | {"body_encoding": "base64"}}).encode(),
]


def unregistered_task() -> bytes:
    """A well-formed message for a task no worker knows: Celery's to refuse (logged, dropped), not kombu's."""
    body = base64.b64encode(json.dumps([[], {}, {}]).encode()).decode()
    headers = {"task": "no.such.task", "id": "unknown-1", "lang": "py"}
    properties = DELIVERY | {"body_encoding": "base64"}
    envelope = {"body": body, "headers": headers, "properties": properties}
    return json.dumps(envelope | {"content-type": "application/json", "content-encoding": "utf-8"}).encode()


class RedisQueues:
    """The Redis of CELERY_BROKER_URL, its gpucloud queues and dead letters emptied."""

    def __init__(self, tmp_path: Path) -> None:
        self.env: dict[str, str] = {}
        self.client = redis.Redis.from_url(os.environ["CELERY_BROKER_URL"])
        self.client.delete("reconcile", "default", broker.DEAD_LETTER_LIST)

    def push(self, queue: str, items: list[bytes]) -> None:
        self.client.lpush(queue, *items)  # kombu takes from the other end: first pushed, first taken

    def send(self, name: str) -> Any:
        return app.send_task(name)

    def dead_letters(self) -> list[Any]:
        return list(self.client.lrange(broker.DEAD_LETTER_LIST, 0, -1))


class FileQueues:
    """The embedded default's broker file, under a var/ of the test's own."""

    def __init__(self, tmp_path: Path) -> None:
        self.path = tmp_path / "var" / "broker.sqlite3"
        self.env = {"GPUCLOUD_VAR_DIR": str(tmp_path / "var"), "CELERY_BROKER_URL": f"sqlite:///{self.path}"}

    def push(self, queue: str, items: list[bytes]) -> None:
        with sqlite3.connect(self.path, timeout=20) as db:
            queue_id = db.execute("SELECT id FROM kombu_queue WHERE name = ?", [queue]).fetchone()[0]
            db.executemany(
                "INSERT INTO kombu_message (visible, timestamp, payload, version, queue_id) "
                "VALUES (1, CURRENT_TIMESTAMP, ?, 1, ?)",
                [(item, queue_id) for item in items],
            )

    def send(self, name: str) -> Any:
        with connect(self.path) as conn:
            return app.send_task(name, connection=conn)


@pytest.mark.worker
@pytest.mark.parametrize("queues", [RedisQueues, FileQueues], ids=["redis", "embedded"])
def test_a_worker_sets_aside_what_is_not_a_task_message_and_runs_the_task_queued_after_it(
    queues, fresh_database, tmp_path
):
    broker_queues = queues(tmp_path)
    env = process_env(DATABASE_URL=fresh_database, GPUCLOUD_METRICS_PORT="0", **broker_queues.env)
    assert gpucloud("migrate", env=env, out=tmp_path / "migrate.log").wait(timeout=300) == 0
    log = tmp_path / "worker.log"
    worker = gpucloud("worker", env=env, out=log)
    try:
        wait_until(lambda: "ready." in log.read_text(), 60, "the worker is ready")
        broker_queues.push("reconcile", NOT_MESSAGES)
        broker_queues.push("default", [*NOT_MESSAGES, unregistered_task()])
        task = broker_queues.send(names.AUDIT_STUCK)  # on the default queue, behind all of them

        wait_until(lambda: f"[{task.id}] succeeded" in log.read_text(), 60, "the task behind them runs")
        assert worker.poll() is None, log.read_text()
    finally:
        stop(worker)
    assert log.read_text().count("that is not a task message") == 2 * len(NOT_MESSAGES)
    assert "Received unregistered task of type 'no.such.task'" in log.read_text()
    if queues is RedisQueues:  # Redis keeps them; the broker file's sweep deletes them with delivered ones
        assert sorted(broker_queues.dead_letters()) == sorted(NOT_MESSAGES * 2)


def test_a_process_that_loses_the_race_to_create_a_queue_takes_the_winners(tmp_path, monkeypatch):
    """Two processes create one queue at once: both looked before either inserted. kombu's own check holds
    within one process only; the loser's insert fails on the unique name, and must not stop its worker."""
    path = tmp_path / "broker.sqlite3"
    with connect(path) as winner, connect(path) as loser:
        winner.default_channel._new_queue("reconcile")
        real_first = Query.first
        looked: list[int] = []

        def before_the_winner_committed(self: Query[Any]) -> Any:
            looked.append(1)
            return None if len(looked) <= 2 else real_first(self)  # kombu looks twice, then inserts

        monkeypatch.setattr(Query, "first", before_the_winner_committed)
        row = loser.default_channel._get_or_create("reconcile")

        assert row.name == "reconcile"
        assert len(looked) == 3
        tables = sqlite3.connect(path).execute("SELECT name FROM kombu_queue").fetchall()
        assert tables == [("reconcile",)]
