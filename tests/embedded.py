"""Start the embedded default as `make run` does, in real processes, for tests and the burst benchmark.

A fresh var/ directory, `manage.py migrate` and `bootstrap` (which prints the admin's API token), then
`manage.py serve_embedded` in its own session, with no DATABASE_URL, broker or keys from the test environment.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.tools import free_port

ROOT = Path(__file__).resolve().parent.parent
EMBEDDED_ONLY = ("DATABASE_URL", "CELERY_BROKER_URL", "SECRET_KEY", "GPUCLOUD_ENCRYPTION_KEYS", "REDIS_URL")


@dataclass
class Embedded:
    """A running embedded default: its address, the printed token, its server process, its var/ directory."""

    base: str
    token: str
    printed: str
    server: subprocess.Popen[bytes]
    var_dir: Path
    env: dict[str, str]
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def embedded_env(var_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in EMBEDDED_ONLY and not k.startswith("PYTEST")}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    env.update(
        GPUCLOUD_VAR_DIR=str(var_dir),
        GPUCLOUD_SIM_PROVISION_DELAY="1",
        GPUCLOUD_SIM_DELETE_DELAY="0.5",
        PYTHONUNBUFFERED="1",
        **extra,
    )
    return env


def manage(env: dict[str, str], *args: str, cwd: Path = ROOT) -> str:
    done = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@contextmanager
def embedded_default(
    var_dir: Path, cwd: Path = ROOT, log_path: Path | None = None, **extra_env: str
) -> Iterator[Embedded]:
    """Run the embedded default until the block ends, then stop it as Ctrl-C in its terminal would."""
    env = embedded_env(var_dir, **extra_env)
    manage(env, "migrate", "--noinput", "-v0", cwd=cwd)
    printed = manage(env, "bootstrap", cwd=cwd)
    token = next(line.split()[-1] for line in printed.splitlines() if "API token" in line)
    port = free_port()
    log_path = log_path or var_dir.parent / f"serve_embedded-{port}.log"
    with log_path.open("wb") as log:
        server = subprocess.Popen(
            [sys.executable, str(ROOT / "manage.py"), "serve_embedded", "--addr", f"127.0.0.1:{port}"],
            cwd=cwd,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    running = Embedded(f"http://127.0.0.1:{port}", token, printed, server, var_dir, env, log_path)
    try:
        wait_until(lambda: get(running.base + "/healthz")[0] == 200, 60)
        yield running
    finally:
        _stop(server, var_dir)


def _stop(server: subprocess.Popen[bytes], var_dir: Path) -> None:
    """Ctrl-C, as in the terminal; then kill what is left of this run, whatever the code under test did."""
    left = set(children(server.pid).values())
    with contextlib.suppress(ProcessLookupError):
        os.killpg(server.pid, signal.SIGINT)
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()
    for pid in left:
        if alive(pid) and ours(pid, var_dir):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def ours(pid: int, var_dir: Path) -> bool:
    """The process belongs to the embedded default on `var_dir` (a pid of another, reused, is left alone)."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False
    return f"GPUCLOUD_VAR_DIR={var_dir}".encode() in environ


def alive(pid: int) -> bool:
    """Running, and not a zombie waiting to be reaped."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def request(
    method: str, url: str, token: str = "", body: dict[str, Any] | None = None
) -> tuple[int, dict[str, Any]]:
    """One HTTP call; (0, {}) when nothing answers."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    req.add_header("Content-Type", "application/json")
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=30) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as error:
        body_bytes = error.read() or b"{}"
        try:
            return error.code, json.loads(body_bytes)
        except ValueError:
            return error.code, {"body": body_bytes.decode(errors="replace")[:200]}
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return 0, {}


def get(url: str, token: str = "") -> tuple[int, dict[str, Any]]:
    return request("GET", url, token)


def wait_until(predicate: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"not reached within {timeout} s")


ROLES = {"runserver": "web", "worker": "worker", "beat": "beat"}


def children(pid: int) -> dict[str, int]:
    """The embedded default's processes under `pid`, by role (web, worker, beat): what `ps` would show."""
    found = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            argv = (stat.parent / "cmdline").read_bytes().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue  # the process ended while we looked
        if ppid != pid:
            continue
        for arg, role in ROLES.items():
            if arg.encode() in argv:
                found[role] = int(stat.parent.name)
    return found
