"""`gpucloud gateway` as a real process: it refuses to start without Redis, answers its probes and the OpenAI
error shape, and on SIGTERM stops being ready, then exits 0."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.tools import free_port

ROOT = Path(__file__).resolve().parents[2]


def process_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env.update(PYTHONPATH=str(ROOT), DJANGO_SETTINGS_MODULE="gpucloud.settings", **extra)
    return env


def call(url: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, object]]:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())
    except (urllib.error.URLError, ConnectionError):
        return 0, {}


def test_the_gateway_refuses_to_start_without_redis(tmp_path):
    env = process_env(GPUCLOUD_VAR_DIR=str(tmp_path / "var"))
    env.pop("CELERY_BROKER_URL", None)  # the embedded default's SQLite broker
    env.pop("GPUCLOUD_GATEWAY_REDIS_URL", None)
    done = subprocess.run(
        [sys.executable, "-m", "gpucloud.cli", "gateway"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 1
    assert "GPUCLOUD_GATEWAY_REDIS_URL" in done.stderr


def test_the_gateway_serves_its_probes_and_drains_on_sigterm(tmp_path):
    if not os.environ.get("CELERY_BROKER_URL", "").startswith("redis://"):
        pytest.fail("this test needs CELERY_BROKER_URL=redis://… (scripts/with-services.sh sets it)")
    port = free_port()
    log = tmp_path / "gateway.log"
    env = process_env(GPUCLOUD_GATEWAY_DRAIN_DELAY="1", GPUCLOUD_GATEWAY_DRAIN_TIMEOUT="5")
    process = subprocess.Popen(
        [sys.executable, "-m", "gpucloud.cli", "gateway", "--bind", f"127.0.0.1:{port}"],
        cwd=ROOT,
        env=env,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while call(f"{base}/healthz")[0] != 200:
            assert process.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        assert call(f"{base}/readyz") == (200, {"status": "ready"})
        status, body = call(f"{base}/v1/models", {"Authorization": "Bearer sk-not-ours"})
        assert status == 401
        assert body["error"]["code"] == "invalid_api_key"

        process.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        assert call(f"{base}/readyz") == (503, {"status": "draining"})  # still listening, not ready
        assert process.wait(timeout=20) == 0
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    assert "gateway serving the OpenAI API on 127.0.0.1" in log.read_text()
