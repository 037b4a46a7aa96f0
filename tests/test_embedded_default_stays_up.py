"""The embedded default (`make run`) stays up: bursts of writes, a killed worker, SIGTERM, a clean directory.

Real processes: `manage.py serve_embedded` with its web server, Celery worker and beat, on SQLite and the
embedded broker under a fresh var/, driven over HTTP from a scratch working directory.
"""

from __future__ import annotations

import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.embedded import alive, children, embedded_default, get, request, wait_until

pytestmark = pytest.mark.worker
TENANTS = [f"burst-{i:02d}" for i in range(20)]


@pytest.fixture(scope="module")
def running(tmp_path_factory):
    scratch = tmp_path_factory.mktemp("cwd")
    log = tmp_path_factory.mktemp("log") / "serve_embedded.log"
    with embedded_default(scratch / "var", cwd=scratch, log_path=log) as embedded:
        yield embedded


def tenant_state(running, slug: str) -> str:
    return str(get(f"{running.base}/api/v1/tenants/{slug}/", running.token)[1].get("state", ""))


def create_ready_tenant(running, slug: str, timeout: float) -> None:
    assert request("POST", f"{running.base}/api/v1/tenants/", running.token, {"slug": slug})[0] == 201
    wait_until(lambda: tenant_state(running, slug) == "ready", timeout)


def test_five_bursts_of_twenty_concurrent_writes_leave_every_process_up(running):
    for slug in TENANTS:
        assert request("POST", f"{running.base}/api/v1/tenants/", running.token, {"slug": slug})[0] == 201
    wait_until(lambda: all(tenant_state(running, slug) == "ready" for slug in TENANTS), 90)
    processes = children(running.server.pid)
    assert set(processes) == {"web", "worker", "beat"}

    def rename(slug: str, round_: int) -> int:
        body = {"display_name": f"{slug} round {round_}"}
        return request("PATCH", f"{running.base}/api/v1/tenants/{slug}/", running.token, body)[0]

    with ThreadPoolExecutor(len(TENANTS)) as pool:
        for round_ in range(5):
            statuses = list(pool.map(rename, TENANTS, [round_] * len(TENANTS)))
            assert statuses == [200] * len(TENANTS), f"burst {round_ + 1}: {statuses}"
            # A pause between bursts, not a wait for anything: the checks below run while the worker is still
            # taking the burst's reconciles, and the next burst lands on a busy worker.
            time.sleep(1)
            assert running.server.poll() is None
            assert children(running.server.pid) == processes

    # The worker still takes work: a tenant created after the bursts comes up.
    create_ready_tenant(running, "after-bursts", 30)
    assert children(running.server.pid) == processes
    assert "Unrecoverable error" not in running.log()


def test_a_killed_worker_is_restarted_and_takes_work_again(running):
    worker = children(running.server.pid)["worker"]
    os.kill(worker, signal.SIGKILL)

    wait_until(lambda: children(running.server.pid).get("worker", worker) != worker, 15)
    assert running.server.poll() is None
    assert set(children(running.server.pid)) == {"web", "worker", "beat"}
    assert "worker exited with -9" in running.log()
    create_ready_tenant(running, "after-restart", 30)


def test_the_embedded_default_writes_nothing_outside_var(running):
    create_ready_tenant(running, "clean-directory", 30)  # web, worker and beat have all done their work

    assert sorted(os.listdir(running.var_dir.parent)) == ["var"]  # the working directory it was started in


def test_sigterm_stops_every_child_and_frees_the_port(tmp_path):
    with embedded_default(tmp_path / "var") as embedded:
        processes = children(embedded.server.pid)
        assert set(processes) == {"web", "worker", "beat"}

        os.kill(embedded.server.pid, signal.SIGTERM)  # the server alone, as a service manager does

        embedded.server.wait(timeout=30)
        wait_until(lambda: not any(alive(pid) for pid in processes.values()), 15)
        assert get(embedded.base + "/healthz")[0] == 0
