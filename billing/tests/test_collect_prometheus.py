"""Collection through a real Prometheus (the Debian package) scraping the simulated exporters."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest
from django.db.models import Sum

from billing.collect import collect_prometheus
from billing.models import MICRO, ScrapeRecord, UsageEntry
from billing.simexporter import ExporterPool
from fleet.models import Gpu
from health.models import HealthEvent
from tests.tools import free_port, unavailable

pytestmark = pytest.mark.django_db(transaction=True)


def prometheus_binary() -> str:
    found = shutil.which("prometheus")
    if found is None:
        unavailable("prometheus is not installed (apt-get install -y prometheus)")
    return found


def query(base: str, expr: str) -> list[dict[str, Any]]:
    url = f"{base}/api/v1/query?{urllib.parse.urlencode({'query': expr})}"
    with urllib.request.urlopen(url, timeout=5) as response:
        result: list[dict[str, Any]] = json.loads(response.read())["data"]["result"]
    return result


@pytest.fixture
def prometheus(mini, tmp_path: Path) -> Iterator[tuple[str, ExporterPool]]:
    """Prometheus on a free loopback port, own config and tsdb, scraping `mini`'s exporters each second."""
    binary = prometheus_binary()
    exporters = ExporterPool(mini)  # the real clock: Prometheus scrapes now
    targets = [url.removeprefix("http://").removesuffix("/metrics") for url in exporters.targets.values()]
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global: {scrape_interval: 1s, scrape_timeout: 1s}\n"
        "scrape_configs:\n"
        "  - job_name: dcgm\n"
        f"    static_configs: [{{targets: {json.dumps(targets)}}}]\n"
    )
    port = free_port()
    log = (tmp_path / "prometheus.log").open("w")
    process = subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if len(query(base, "DCGM_FI_DEV_GPU_UTIL")) >= 6:  # 4 H100 rows + 2 A100 rows
                    break
            except OSError:
                pass
            assert process.poll() is None, (tmp_path / "prometheus.log").read_text()
            time.sleep(0.3)
        else:
            pytest.fail(
                "Prometheus had no DCGM samples after 60 s:\n" + (tmp_path / "prometheus.log").read_text()
            )
        yield base, exporters
    finally:
        process.terminate()
        process.wait(10)
        exporters.stop()
        log.close()


def test_usage_collected_through_prometheus_is_billed_to_each_tenant(mini, tenant_on, make_pod, prometheus):
    base, _ = prometheus
    acme = tenant_on("acme")
    now = datetime.now(UTC)
    make_pod("train", "tenant-acme", "h100-80gb", "h100-0", [0, 1], now - timedelta(hours=1))
    make_pod("infer", "tenant-acme", "a100-80gb.mig-1g.10gb", "a100-0", [1], now - timedelta(hours=1), gi=9)
    deadline = time.monotonic() + 30
    while (
        True
    ):  # until Prometheus' answer one second ago already shows the pods (slow when the machine is busy)
        t1 = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=1)
        expr = f'count(DCGM_FI_DEV_FB_USED{{namespace="tenant-acme"}} @ {t1.timestamp():.0f})'
        if [r["value"][1] for r in query(base, expr)] == ["3"]:
            break
        assert time.monotonic() < deadline, "Prometheus never showed the pods"
        time.sleep(0.3)
    first = collect_prometheus(mini, base, t1)
    t2 = t1 + timedelta(seconds=2)
    while datetime.now(UTC) < t2 + timedelta(seconds=1.2):
        time.sleep(0.2)
    second = collect_prometheus(mini, base, t2)
    for records in (first, second):
        assert {n: r.status for n, r in records.items()} == {"h100-0": "ok", "a100-0": "ok"}
        assert all(r.source == ScrapeRecord.Source.PROMETHEUS for r in records.values())
    rows = UsageEntry.objects.filter(tenant=acme).values("gpu_class").annotate(s=Sum("gpu_us"))
    # Both samples 2 s apart see the pods: two whole H100s and one MIG slice for 2 s each.
    assert {r["gpu_class"]: r["s"] for r in rows} == {
        "h100-80gb": 4 * MICRO,
        "a100-80gb.mig-1g.10gb": 2 * MICRO,
    }


def test_a_prometheus_that_cannot_be_reached_fails_every_node_with_the_reason(mini):
    base = f"http://127.0.0.1:{free_port()}"
    records = collect_prometheus(mini, base, datetime(2026, 5, 10, tzinfo=UTC))
    assert {r.status for r in records.values()} == {"failed"}
    assert all("could not be reached" in r.reason for r in records.values())
    assert UsageEntry.objects.count() == 0


def test_a_prometheus_answer_that_is_not_a_query_result_fails_every_node(mini):
    class Garbled(BaseHTTPRequestHandler):
        def do_GET(self):
            body = b'{"status": "success", "data": '  # cut off mid-answer
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            return

    server = HTTPServer(("127.0.0.1", 0), Garbled)
    threading.Thread(target=server.handle_request, daemon=True).start()
    try:
        records = collect_prometheus(
            mini, f"http://127.0.0.1:{server.server_port}", datetime(2026, 5, 10, tzinfo=UTC)
        )
    finally:
        server.server_close()
    assert {r.status for r in records.values()} == {"failed"}
    assert all("not a query result" in r.reason for r in records.values())


def test_an_xid_read_through_prometheus_quarantines_the_gpu(mini, prometheus):
    base, exporters = prometheus
    exporters.servers["h100-0"].exporter.inject(3, DCGM_FI_DEV_XID_ERRORS=79)
    deadline = time.monotonic() + 30
    while True:  # until Prometheus' answer one second ago shows the XID
        t1 = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=1)
        expr = f'DCGM_FI_DEV_XID_ERRORS{{gpu="3",hostname="h100-0"}} @ {t1.timestamp():.0f}'
        if [r["value"][1] for r in query(base, expr)] == ["79"]:
            break
        assert time.monotonic() < deadline, "Prometheus never showed the XID"
        time.sleep(0.3)
    collect_prometheus(mini, base, t1)
    gpu = Gpu.objects.get(node__name="h100-0", index=3)
    assert gpu.health == Gpu.Health.QUARANTINED
    assert HealthEvent.objects.get(gpu=gpu).value == "79"
