"""The embedded broker (gpucloud/broker.py): one SQLite file shared by several processes, kept small."""

from __future__ import annotations

import multiprocessing
import sqlite3
from pathlib import Path

from kombu import Connection

from gpucloud import broker

TRANSPORT = "gpucloud.broker:Transport"


def connect(path: Path) -> Connection:
    return Connection(f"sqlite:///{path}", transport=TRANSPORT)


def consume(path: str, results: multiprocessing.Queue) -> None:
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
