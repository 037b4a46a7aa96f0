"""`make run`'s embedded default, as a person would use it: real processes, real HTTP, the printed token.

SQLite and the file-system broker under a fresh var/ directory, `manage.py bootstrap` for the admin and token,
`manage.py serve_embedded` for web + worker + beat, then the README flow over HTTP, then Ctrl-C.
"""

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

pytestmark = pytest.mark.worker
ROOT = Path(__file__).resolve().parent.parent
EMBEDDED_ONLY = ("DATABASE_URL", "CELERY_BROKER_URL", "SECRET_KEY", "GPUCLOUD_ENCRYPTION_KEYS", "REDIS_URL")


@pytest.fixture
def embedded(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in EMBEDDED_ONLY and not k.startswith("PYTEST")}
    env.update(
        GPUCLOUD_VAR_DIR=str(tmp_path / "var"),
        GPUCLOUD_SIM_PROVISION_DELAY="1",
        GPUCLOUD_SIM_DELETE_DELAY="0.5",
    )
    env.pop("DJANGO_SETTINGS_MODULE", None)

    def manage(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    manage("migrate", "--noinput", "-v0")
    printed = manage("bootstrap")
    token = next(line.split()[-1] for line in printed.splitlines() if "API token" in line)
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "manage.py", "serve_embedded", "--addr", f"127.0.0.1:{port}"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: get(base + "/healthz")[0] == 200, 60)
        yield base, token, printed
    finally:
        os.killpg(server.pid, signal.SIGINT)  # what Ctrl-C in the terminal does
        server.wait(timeout=30)


def request(method: str, url: str, token: str = "", body: dict | None = None) -> tuple[int, dict]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    req.add_header("Content-Type", "application/json")
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=10) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")
    except (urllib.error.URLError, ConnectionError):
        return 0, {}


def get(url: str, token: str = "") -> tuple[int, dict]:
    return request("GET", url, token)


def wait_until(predicate, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"not reached within {timeout} s")


def test_the_printed_token_drives_a_tenant_through_its_life_on_the_embedded_default(embedded):
    base, token, printed = embedded
    api = base + "/api/v1"
    assert "password" in printed and token.startswith("gpc_")

    assert request("POST", f"{api}/tenants/", token, {"slug": "vision"})[0] == 201
    started = time.monotonic()
    wait_until(lambda: get(f"{api}/tenants/vision/", token)[1].get("state") == "ready", 10)
    assert time.monotonic() - started < 10

    assert request("PUT", f"{api}/tenants/vision/quotas/h200-141gb/", token, {"guaranteed": 8})[0] == 201
    status, refusal = request("PUT", f"{api}/tenants/vision/quotas/h200-141gb/", token, {"guaranteed": 65})
    assert status == 422 and (refusal["capacity"], refusal["requested"], refusal["available"]) == (64, 65, 64)
    h200 = get(f"{api}/fleet/capacity/?gpu_model=h200-141gb&limit=1", token)[1]["results"][0]
    assert (h200["guaranteed"], h200["available"]) == (8, 56)

    assert request("DELETE", f"{api}/tenants/vision/", token)[0] == 202
    wait_until(lambda: get(f"{api}/tenants/vision/", token)[1].get("state") == "deleted", 10)
    h200 = get(f"{api}/fleet/capacity/?gpu_model=h200-141gb&limit=1", token)[1]["results"][0]
    assert (h200["guaranteed"], h200["available"]) == (0, 64)

    assert get(base + "/readyz")[0] == 200
    assert get(f"{api}/tenants/", "gpc_wrong")[0] == 401
