"""`gpucloud web|worker|scheduler|migrate|extender` as real processes on PostgreSQL and Redis.

No Django test database here: each test that needs a database gets a fresh one of its own on the server of
DATABASE_URL, because the processes under test create and migrate it themselves.
"""

from __future__ import annotations

import concurrent.futures
import itertools
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg
import pytest
import redis

from tests.tools import free_port, with_database

pytestmark = pytest.mark.worker
ROOT = Path(__file__).resolve().parents[2]


def process_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env.update(PYTHONPATH=str(ROOT), DJANGO_SETTINGS_MODULE="gpucloud.settings", **extra)
    return env


def gpucloud(*args: str, env: dict[str, str], out: Path) -> subprocess.Popen[bytes]:
    """Start `gpucloud ARGS…` (the console script's own entry point) with its output in a file."""
    return subprocess.Popen(
        [sys.executable, "-m", "gpucloud.cli", *args],
        cwd=ROOT,
        env=env,
        stdout=out.open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def stop(process: subprocess.Popen[bytes], sig: int = signal.SIGTERM, timeout: float = 30) -> int:
    if process.poll() is None:
        process.send_signal(sig)
    try:
        return process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        raise


def wait_until(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"not within {timeout} s: {what}")


# --- migrate ------------------------------------------------------------------------------------------------


def test_two_migrations_started_at_once_on_a_fresh_database_both_succeed(fresh_database, tmp_path):
    env = process_env(DATABASE_URL=fresh_database)
    runs = [gpucloud("migrate", env=env, out=tmp_path / f"migrate-{i}.log") for i in range(2)]
    codes = [run.wait(timeout=300) for run in runs]
    logs = [(tmp_path / f"migrate-{i}.log").read_text() for i in range(2)]
    assert codes == [0, 0], logs
    with psycopg.connect(fresh_database) as conn:
        applied = conn.execute("SELECT app, name, count(*) FROM django_migrations GROUP BY 1, 2").fetchall()
    assert applied
    assert all(count == 1 for _, _, count in applied)
    # One of them did the work; the other waited for it and found nothing left to apply.
    assert sum("No migrations to apply" in log for log in logs) == 1


# --- scheduler ----------------------------------------------------------------------------------------------

SENT = re.compile(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}).*Sending due task reconcile-all")


def sends(log: Path) -> list[float]:
    stamps = SENT.findall(log.read_text())
    return [time.mktime(time.strptime(s[:19], "%Y-%m-%d %H:%M:%S")) + int(s[20:]) / 1000 for s in stamps]


@pytest.fixture
def broker() -> redis.Redis:
    """The Redis of CELERY_BROKER_URL, without RedBeat state or queued reconciles from earlier runs."""
    client = redis.Redis.from_url(os.environ["CELERY_BROKER_URL"])
    for key in client.scan_iter("gpucloud-redbeat*"):
        client.delete(key)
    client.delete("reconcile")
    return client


def test_two_schedulers_started_at_once_fire_each_schedule_once_and_the_standby_takes_over(broker, tmp_path):
    env = process_env(GPUCLOUD_RECONCILE_INTERVAL="1", GPUCLOUD_SCHEDULER_LOCK_TIMEOUT="10")
    logs = [tmp_path / "scheduler-a.log", tmp_path / "scheduler-b.log"]
    schedulers = [gpucloud("scheduler", env=env, out=log) for log in logs]
    try:
        wait_until(lambda: any(sends(log) for log in logs), 60, "a scheduler fires")
        # Five firings a second apart: time enough for a standby that ignored the lock to fire too.
        wait_until(lambda: any(len(sends(log)) >= 5 for log in logs), 30, "five firings")
        counts = [len(sends(log)) for log in logs]
        leader = counts.index(max(counts))
        standby = 1 - leader
        assert counts[standby] == 0, "the standby fired while the leader held the lock"
        fired = sends(logs[leader])
        assert len(fired) >= 5
        assert all(b - a >= 0.8 for a, b in itertools.pairwise(fired)), fired

        # Every firing is one message on the reconcile queue, not one per scheduler. The log line comes just
        # before the message is published, so the two are compared between firings, not at any instant.
        def queued_as_logged(*which: int) -> bool:
            return int(broker.llen("reconcile")) == sum(len(sends(logs[i])) for i in which)

        wait_until(lambda: queued_as_logged(leader), 5, "one message on the queue per firing logged")

        assert stop(schedulers[leader]) == 0  # a clean stop releases the lock at once
        wait_until(lambda: len(sends(logs[standby])) >= 2, 30, "the standby takes over")
        wait_until(lambda: queued_as_logged(leader, standby), 5, "one message per firing of either scheduler")
    finally:
        for scheduler in schedulers:
            stop(scheduler)


def healthz(port: int) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())
    except OSError:
        return 0, {}


def test_the_leader_beats_its_liveness_probe_each_loop_and_the_standby_waiting_for_the_lock_is_alive(
    broker, tmp_path
):
    ports = [free_port(), free_port()]
    logs = [tmp_path / "scheduler-a.log", tmp_path / "scheduler-b.log"]
    base = process_env(GPUCLOUD_RECONCILE_INTERVAL="1", GPUCLOUD_SCHEDULER_LOCK_TIMEOUT="10")
    schedulers = [
        gpucloud("scheduler", env=base | {"GPUCLOUD_HEALTH_PORT": str(port)}, out=log)
        for port, log in zip(ports, logs, strict=True)
    ]
    try:
        wait_until(lambda: any(sends(log) for log in logs), 60, "a scheduler fires")
        leader = 0 if sends(logs[0]) else 1
        status, body = healthz(ports[leader])
        assert status == 200
        assert body["max"] == 10.0  # the lock timeout: a leader that has not come round has lost its lock
        assert body["seconds_since_beat"] < 6  # beat's loop comes round every 5 s at most
        assert healthz(ports[1 - leader]) == (
            200,
            {"alive": True, "beat": "none yet: starting, or waiting for its turn"},
        )
    finally:
        for scheduler in schedulers:
            stop(scheduler)


def test_the_scheduler_refuses_to_start_without_redis(tmp_path):
    env = process_env(GPUCLOUD_VAR_DIR=str(tmp_path / "var"))
    env.pop("CELERY_BROKER_URL")  # the embedded default's SQLite broker
    done = subprocess.run(
        [sys.executable, "-m", "gpucloud.cli", "scheduler"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 1
    assert "GPUCLOUD_SCHEDULER_REDIS_URL" in done.stderr


# --- web ----------------------------------------------------------------------------------------------------


def get(url: str, headers: dict[str, str] | None = None) -> int:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=30) as r:
            status: int = r.status
            return status
    except urllib.error.HTTPError as error:
        return error.code
    except (urllib.error.URLError, ConnectionError):
        return 0


def connections_of(database_url: str, application: str) -> int:
    with psycopg.connect(with_database(database_url, "postgres")) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND application_name = %s",
            [urlsplit(database_url).path.lstrip("/"), application],
        ).fetchone()
    return int(row[0]) if row else 0


def test_web_logs_each_request_as_json_and_stops_gracefully(fresh_database, tmp_path):
    port = free_port()
    log = tmp_path / "web.log"
    metrics_port = free_port()
    env = process_env(DATABASE_URL=fresh_database, GPUCLOUD_METRICS_PORT=str(metrics_port))
    web = gpucloud("web", "--bind", f"127.0.0.1:{port}", env=env, out=log)
    try:
        wait_until(lambda: "Booting worker" in log.read_text(), 60, "gunicorn starts")
        wait_until(lambda: get(f"http://127.0.0.1:{port}/healthz") == 200, 60, "/healthz answers")
        assert get(f"http://127.0.0.1:{port}/healthz", {"X-Request-ID": "req-4"}) == 200
        for _ in range(20):
            get(f"http://127.0.0.1:{port}/healthz")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
            metrics = response.read().decode()
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as response:
            scraped = response.read().decode()
    finally:
        code = stop(web)
    lines = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    access = [line for line in lines if line["logger"] == "gunicorn.access" and line["request_id"] == "req-4"]
    assert access
    assert access[0] | {"method": "GET", "path": "/healthz", "status": 200} == access[0]
    assert access[0]["duration_ms"] >= 0
    assert code == 0
    assert any(line["message"] == "Shutting down: Master" for line in lines)
    # Two gunicorn workers served those requests; /metrics, answered by either, counts them all.
    # The metrics port (what Prometheus scrapes) says the same.
    for text in (metrics, scraped):
        served = re.findall(r'gpucloud_http_requests_total\{[^}]*view="healthz"[^}]*\} (\S+)', text)
        assert sum(float(value) for value in served) >= 21


def test_a_web_process_holds_no_more_database_connections_than_its_pool_under_a_burst(
    fresh_database, tmp_path
):
    port = free_port()
    env = process_env(
        DATABASE_URL=fresh_database,
        GPUCLOUD_WEB_WORKERS="1",
        GPUCLOUD_WEB_THREADS="8",
        GPUCLOUD_DB_POOL_MAX_SIZE="2",
    )
    web = gpucloud("web", "--bind", f"127.0.0.1:{port}", env=env, out=tmp_path / "web.log")
    url = f"http://127.0.0.1:{port}/readyz"  # one query per request
    seen = 0
    try:
        wait_until(lambda: get(url) == 200, 60, "/readyz answers")
        with concurrent.futures.ThreadPoolExecutor(16) as clients:
            burst = [clients.submit(get, url) for _ in range(400)]
            while not all(f.done() for f in burst):
                seen = max(seen, connections_of(fresh_database, "gpucloud-web"))
            statuses = [f.result() for f in burst]
        seen = max(seen, connections_of(fresh_database, "gpucloud-web"))
    finally:
        stop(web)
    assert statuses == [200] * 400
    assert 1 <= seen <= 2


# --- extender -----------------------------------------------------------------------------------------------


def test_the_extender_serves_kube_schedulers_certificate_and_probes_on_plain_http(fresh_database, tmp_path):
    import http.client
    import ssl

    from placement.tests.test_extender_service import _certificates

    files = _certificates(tmp_path)
    env = process_env(DATABASE_URL=fresh_database)
    assert gpucloud("migrate", env=env, out=tmp_path / "migrate.log").wait(timeout=300) == 0
    port, health = free_port(), free_port()
    env.update(
        GPUCLOUD_EXTENDER_BIND=f"127.0.0.1:{port}",
        GPUCLOUD_EXTENDER_TLS_CERT=files["server.crt"],
        GPUCLOUD_EXTENDER_TLS_KEY=files["server.key"],
        GPUCLOUD_EXTENDER_TLS_CLIENT_CA=files["ca.crt"],
    )
    log = tmp_path / "extender.log"
    extender = gpucloud("extender", "--health-bind", f"127.0.0.1:{health}", env=env, out=log)
    try:
        wait_until(lambda: get(f"http://127.0.0.1:{health}/healthz") == 200, 60, "/healthz answers")
        assert get(f"http://127.0.0.1:{health}/scheduler/v1/east/filter") == 404
        plain = http.client.HTTPConnection("127.0.0.1", health, timeout=5)
        plain.request("POST", "/scheduler/v1/east/filter", b"{}")
        assert plain.getresponse().status == 404  # the verbs are never served in plain HTTP
        context = ssl.create_default_context(cafile=files["ca.crt"])
        context.load_cert_chain(files["scheduler.crt"], files["scheduler.key"])
        scheduler = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=5)
        scheduler.request("POST", "/scheduler/v1/east/filter", b"{}")
        response = scheduler.getresponse()
        assert response.status == 404
        assert "east" in response.read().decode()  # in, but no such host cluster
        stranger = http.client.HTTPSConnection(
            "127.0.0.1", port, context=ssl.create_default_context(cafile=files["ca.crt"]), timeout=5
        )

        def ask_as_stranger() -> None:
            stranger.request("GET", "/healthz")
            stranger.getresponse()

        # Refused on the request or, as TLS 1.3 checks the client's certificate late, on the answer.
        with pytest.raises((ssl.SSLError, ConnectionError)):
            ask_as_stranger()
        assert f"/healthz on 127.0.0.1:{health}" in log.read_text()
    finally:
        code = stop(extender)
    assert code == 0  # SIGTERM (the kubelet's) stops it cleanly


def test_the_extender_refuses_half_a_tls_pair_from_the_environment(tmp_path):
    env = process_env(GPUCLOUD_VAR_DIR=str(tmp_path / "var"), GPUCLOUD_EXTENDER_TLS_CERT="server.crt")
    done = subprocess.run(
        [sys.executable, "-m", "gpucloud.cli", "extender", "--health-bind", f"127.0.0.1:{free_port()}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1
    assert "gpucloud extender: --tls-cert and --tls-key go together" in done.stderr
