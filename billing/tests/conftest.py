"""Fixtures of billing tests: a small fleet, tenants on it, and expositions written row by row."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, HTTPServer, ThreadingHTTPServer
from typing import Any

import pytest

from billing.models import Invoice, InvoiceLine, RateCard
from billing.simexporter import ExporterPool
from core.audit import Actor
from fleet import fleet_file
from fleet.models import GpuClass, HostCluster, Node, Pod
from fleet.services import load_fleet
from tenants.models import Tenant
from tenants.services import lifecycle

SYSTEM = Actor.system("tests")
T0 = datetime(2026, 5, 10, 12, 0, tzinfo=UTC)  # on the hour: hour buckets are easy to read
H100 = "NVIDIA H100 80GB HBM3"
A100 = "NVIDIA A100-SXM4-80GB"
MINI_FLEET = {
    "apiVersion": "gpucloud.io/v1alpha1",
    "kind": "Fleet",
    "metadata": {"name": "mini"},
    "spec": {
        "region": "test-1",
        "nodeGroups": [
            {
                "name": "h100",
                "count": 1,
                "gpuModel": "h100-80gb",
                "gpusPerNode": 4,
                "cpuMilli": 64000,
                "memoryMiB": 524288,
            },
            {
                "name": "a100",
                "count": 1,
                "gpuModel": "a100-80gb",
                "gpusPerNode": 2,
                "cpuMilli": 64000,
                "memoryMiB": 524288,
            },
        ],
    },
}


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


@pytest.fixture
def mini(gpu_catalog: None) -> HostCluster:
    """A simulated host cluster `mini`: node h100-0 (4 × H100) and node a100-0 (2 × A100)."""
    return load_fleet(actor=SYSTEM, fleet=fleet_file.parse(MINI_FLEET), source="mini").host_cluster


class Clock:
    """The time the simulated exporters report: T0 until a test moves `now`."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def pool(mini: HostCluster) -> Iterator[tuple[ExporterPool, Clock]]:
    """A simulated DCGM exporter per node of `mini` on loopback, and the clock they read."""
    clock = Clock(T0)
    exporters = ExporterPool(mini, clock)
    yield exporters, clock
    exporters.stop()


@pytest.fixture
def tenant_on(admin: Any, mini: HostCluster) -> Callable[..., Tenant]:
    """A tenant whose host namespace is `tenant-<slug>` on `mini`."""

    def make(slug: str, **kwargs: Any) -> Tenant:
        return lifecycle.create_tenant(actor=Actor.of(admin), slug=slug, host_cluster=mini, **kwargs)

    return make


def gpu_uuid(node: str, index: int) -> str:
    return fleet_file.gpu_uuid("mini", node, index)


@dataclass
class Row:
    """One device row of an exposition; `pod` is `namespace/name` or empty."""

    uuid: str
    model: str = H100
    pod: str = ""
    util: float | None = 50.0
    energy_mj: int | None = None
    profile: str = ""
    gi: str = ""
    index: int = 0


def exposition(node: str, rows: Iterable[Row], *, hostname_label: str = "hostname") -> str:
    """What dcgm-exporter in Kubernetes mode shows for these rows: memory, util, energy, a family not read."""
    lines = ["# HELP DCGM_FI_DEV_GPU_TEMP GPU temperature (in C).", "# TYPE DCGM_FI_DEV_GPU_TEMP gauge"]
    for row in rows:
        namespace, _, pod = row.pod.partition("/")
        mig = f',GPU_I_PROFILE="{row.profile}",GPU_I_ID="{row.gi}"' if row.gi else ""
        labels = (
            f'gpu="{row.index}",UUID="{row.uuid}",pci_bus_id="",device="nvidia{row.index}",'
            f'modelName="{row.model}"{mig},{hostname_label}="{node}",container="{"main" if pod else ""}",'
            f'namespace="{namespace}",pod="{pod}"'
        )
        lines.append(f"DCGM_FI_DEV_GPU_TEMP{{{labels}}} 40")
        lines.append(f"DCGM_FI_DEV_FB_USED{{{labels}}} {2048 if pod else 0}")
        if row.util is not None:
            lines.append(f"DCGM_FI_DEV_GPU_UTIL{{{labels}}} {row.util:g}")
        if row.energy_mj is not None:
            lines.append(f"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{{{labels}}} {row.energy_mj}")
    return "\n".join(lines) + "\n"


@pytest.fixture
def make_pod(mini: HostCluster) -> Callable[..., Any]:
    """A Pod on `mini`: what the simulated fleet ran, the ground truth of metering."""

    def make(
        name: str,
        namespace: str,
        gpu_class: str,
        node: str,
        gpus: Iterable[int],
        start: datetime,
        finish: datetime | None = None,
        *,
        gi: int | None = None,
        milli: int = 1000,
        tenant: Tenant | None = None,
    ) -> Pod:
        return Pod.objects.create(
            host_cluster=mini,
            tenant=tenant,
            namespace=namespace,
            name=name,
            gpu_class=GpuClass.objects.get(name=gpu_class),
            node=Node.objects.get(host_cluster=mini, name=node),
            gpu_uuids=[gpu_uuid(node, i) for i in gpus],
            gpu_instance_id=gi,
            gpu_milli=milli,
            started_at=start,
            finished_at=finish,
        )

    return make


class Receiver:
    """A local HTTP server that records what reaches it and answers `status` (with `location`)."""

    def __init__(self, status: int = 204, location: str = "") -> None:
        self.requests: list[tuple[str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                outer.requests.append(("POST", json.loads(self.rfile.read(length))))
                self.answer()

            def do_GET(self) -> None:
                outer.requests.append(("GET", None))
                self.answer()

            def answer(self) -> None:
                self.send_response(status)
                if location:
                    self.send_header("Location", location)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Endpoints:
    """A loopback HTTP server answering each path with the body set for it (404 for others)."""

    def __init__(self) -> None:
        self.bodies: dict[str, str] = {}
        bodies = self.bodies

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = bodies.get(self.path)
                if body is None:
                    self.send_error(404)
                    return
                data = body.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.httpd = HTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def receivers() -> Iterator[list[Receiver]]:
    made: list[Receiver] = []
    yield made
    for receiver in made:
        receiver.stop()


def invoice_issued_with(card: RateCard) -> Invoice:
    """January 2026's invoice of a new tenant `acme`, issued, with a line at the card's prices: what keeps a
    rate card from being deleted (it is retired instead)."""
    tenant = lifecycle.create_tenant(actor=Actor.console("tests"), slug="acme")
    invoice = Invoice.objects.create(
        tenant=tenant, period_start=datetime(2026, 1, 1, tzinfo=UTC),
        period_end=datetime(2026, 2, 1, tzinfo=UTC), state=Invoice.State.ISSUED, trust_tier="standard",
    )  # fmt: skip
    InvoiceLine.objects.create(
        invoice=invoice, kind="usage", gpu_class="h200-141gb", description="usage",
        charge_start=invoice.period_start, charge_end=invoice.period_end, gpu_hours=1, list_unit_price=3,
        unit_price=3, list_amount=3, amount=3, currency="USD", rate_card_version=card.version,
    )  # fmt: skip
    return invoice
