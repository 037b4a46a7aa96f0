"""`gpucloud.liveness`: /healthz over real HTTP, alive while the loop beats and 503 once it stops."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest

from gpucloud.liveness import Heartbeat, serve
from tests.tools import free_port


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def probed():
    clock = Clock()
    heartbeat = Heartbeat(clock)
    port = free_port()
    server = serve(port, 30.0, host="127.0.0.1", heartbeat=heartbeat)
    yield clock, heartbeat, f"http://127.0.0.1:{port}"
    server.shutdown()
    server.server_close()


def probe(url: str) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_a_process_is_alive_before_its_first_beat_while_it_beats_and_not_once_it_stops(probed):
    clock, heartbeat, url = probed
    status, body = probe(url + "/healthz")
    assert status == 200  # starting, or a standby waiting for the leader's lock
    assert body["beat"].startswith("none yet")
    heartbeat.beat()
    clock.now += 29.5
    assert probe(url + "/healthz") == (200, {"alive": True, "seconds_since_beat": 29.5, "max": 30.0})
    clock.now += 1
    assert probe(url + "/healthz") == (503, {"alive": False, "seconds_since_beat": 30.5, "max": 30.0})
    heartbeat.beat()
    assert probe(url + "/healthz")[0] == 200


def test_the_port_serves_healthz_alone(probed):
    _, _, url = probed
    assert probe(url + "/metrics")[0] == 404
