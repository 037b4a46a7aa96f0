"""dcgm-exporter endpoints for the simulated fleet: one HTTP server per node on loopback.

Each server renders, at the time its clock says, what the real exporter in Kubernetes mode would show for the
`Pod` rows running on its node: one row per GPU (one per pod on a time-sliced GPU), the parent GPU
row and one row per MIG instance (`GPU_I_PROFILE`, `GPU_I_ID`, the parent's UUID) on partitioned GPUs, pod and
namespace labels, utilisation and an energy counter. The label layout follows the real exporter
(`../shared/reference/kubernetes-objects.md` §7.2). The simulated cluster also tells what a Kubernetes API
would: each pod's exact start and finish and its share of a GPU (`cluster_facts`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from django.db import connections
from django.db.models import Q

from billing.lifecycle import pod_facts
from billing.services.ingest import ClusterFacts
from fleet.models import Gpu, GpuClass, HostCluster, Node, Pod

Clock = Callable[[], datetime]
BOOT = 1_700_000_000  # the simulated GPUs' energy counters count from here (Unix seconds)
IDLE_WATTS, BUSY_WATTS = 90, 550
FAMILIES = (
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "Total energy consumption since boot (in mJ)."),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "Ratio of time the graphics engine is active."),
    # Health fields (docs/health.md), on each GPU's own row only: 0 until a fault is injected (`inject`).
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered."),
    ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter", "Total number of double-bit volatile ECC errors."),
    ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether remapping of rows has failed"),
    ("DCGM_FI_DEV_THERMAL_VIOLATION", "counter", "Throttling duration due to thermal constraints (in ns)."),
    ("DCGM_FI_DEV_POWER_VIOLATION", "counter", "Throttling duration due to power constraints (in ns)."),
)
HEALTH_DEFAULTS = {
    "DCGM_FI_DEV_XID_ERRORS": 0.0,
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": 0.0,
    "DCGM_FI_DEV_ROW_REMAP_FAILURE": 0.0,
    "DCGM_FI_DEV_THERMAL_VIOLATION": 0.0,
    "DCGM_FI_DEV_POWER_VIOLATION": 0.0,
}


def utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass
class _Row:
    labels: str
    values: dict[str, str]


def _labels(gpu: Gpu, node: str, pod: Pod | None, mig: tuple[str, int] | None) -> str:
    parts = [
        f'gpu="{gpu.index}"',
        f'UUID="{gpu.uuid}"',
        f'pci_bus_id="00000000:{gpu.index + 0x18:02X}:00.0"',
        f'device="nvidia{gpu.index}"',
        f'modelName="{_model_name(gpu)}"',
    ]
    if mig is not None:
        parts += [f'GPU_I_PROFILE="{mig[0]}"', f'GPU_I_ID="{mig[1]}"']
    parts.append(f'hostname="{node}"')
    container = "main" if pod else ""
    parts += [
        f'container="{container}"',
        f'namespace="{pod.namespace if pod else ""}"',
        f'pod="{pod.name if pod else ""}"',
    ]
    return "{" + ",".join(parts) + "}"


def _model_name(gpu: Gpu) -> str:
    names = gpu.gpu_model.dcgm_model_names
    return names[0] if names else gpu.gpu_model.display_name


def _energy_mj(t: float) -> int:
    return int((t - BOOT) * BUSY_WATTS * 1000)


def _running(pod: Pod, at: datetime) -> bool:
    return pod.started_at <= at and (pod.finished_at is None or at < pod.finished_at)


class NodeExporter:
    """Renders one node's /metrics at a given time from the Pod rows."""

    def __init__(self, node: Node) -> None:
        self.node = node
        self.gpus = list(Gpu.objects.filter(node=node).select_related("gpu_model").order_by("index"))
        self.classes = {c.pk: c for c in GpuClass.objects.all()}
        # Faults the simulated GPUs show from now on (tests and demos): field values by GPU index, and GPUs
        # that fell off the bus (not listed at all, as the real exporter does then).
        self.faults: dict[int, dict[str, float]] = {}
        self.missing: set[int] = set()

    def inject(self, index: int, **fields: float) -> None:
        """Make GPU `index` report these health fields (`DCGM_FI_DEV_XID_ERRORS=79`, …) from now on."""
        self.faults.setdefault(index, {}).update(fields)

    def drop(self, index: int, dropped: bool = True) -> None:
        """Make GPU `index` vanish from (or come back to) the node's exposition."""
        (self.missing.add if dropped else self.missing.discard)(index)

    def heal(self) -> None:
        """Every GPU healthy and listed again (a reboot)."""
        self.faults.clear()
        self.missing.clear()

    def render(self, at: datetime) -> str:
        """The node's /metrics at `at`, from the database."""
        # Running pods, and every MIG pod of the node: its instance exists before and after the pod.
        pods = Pod.objects.filter(node=self.node).filter(
            Q(started_at__lte=at, finished_at__isnull=True)
            | Q(started_at__lte=at, finished_at__gt=at)
            | Q(gpu_instance_id__isnull=False)
        )
        # A fixed order, so that every scrape lists a shared GPU's holders the same way.
        return self.render_pods(list(pods.order_by("started_at", "namespace", "name")), at)

    def render_pods(self, pods: list[Pod], at: datetime) -> str:
        """The node's /metrics at `at` from pods already read (a replay reads them once)."""
        gpus = [gpu for gpu in self.gpus if gpu.index not in self.missing]
        rows = [row for gpu in gpus for row in self._gpu_rows(gpu, pods, at)]
        lines = []
        for name, kind, help_text in FAMILIES:
            lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
            lines += [f"{name}{row.labels} {row.values[name]}" for row in rows if name in row.values]
        return "\n".join(lines) + "\n"

    def _gpu_rows(self, gpu: Gpu, pods: list[Pod], at: datetime) -> Iterable[_Row]:
        t = at.timestamp()
        on_gpu = [p for p in pods if gpu.uuid in p.gpu_uuids]
        instances = {
            p.gpu_instance_id: self.classes[p.gpu_class_id].mig_profile
            for p in on_gpu
            if p.gpu_instance_id is not None
        }
        holders = [p for p in on_gpu if p.gpu_instance_id is None and _running(p, at)]
        busy = bool(holders) or any(_running(p, at) for p in on_gpu)
        device = {
            "DCGM_FI_DEV_GPU_UTIL": "85" if busy else "0",
            "DCGM_FI_DEV_GPU_TEMP": "61" if busy else "34",
            "DCGM_FI_DEV_POWER_USAGE": f"{BUSY_WATTS if busy else IDLE_WATTS}.0",
            "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": str(_energy_mj(t)),
        }
        shown: list[Pod | None] = list(holders) or [None]
        device_health = {
            k: f"{v:g}" for k, v in {**HEALTH_DEFAULTS, **self.faults.get(gpu.index, {})}.items()
        }
        for i, pod in enumerate(shown):
            values = {**device, **_activity(pod is not None), **(device_health if i == 0 else {})}
            yield _Row(_labels(gpu, self.node.name, pod, None), values)
        for gi_id, profile in sorted(instances.items()):
            holder = next((p for p in on_gpu if p.gpu_instance_id == gi_id and _running(p, at)), None)
            yield _Row(_labels(gpu, self.node.name, holder, (profile, gi_id)), _activity(holder is not None))


def _activity(busy: bool) -> dict[str, str]:
    return {
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE": "0.75" if busy else "0",
        "DCGM_FI_DEV_FB_USED": "30000" if busy else "0",
    }


def cluster_facts(host_cluster: HostCluster, at: datetime, window: float) -> ClusterFacts:
    """What the simulated cluster's API tells about pods near `at`: exact edges, shares, classes (the same
    rows and rule as any host cluster's, `billing.lifecycle`)."""
    return pod_facts(host_cluster, at, window)


class _Handler(BaseHTTPRequestHandler):
    exporter: NodeExporter
    clock: Clock

    def do_GET(self) -> None:
        if self.path.split("?")[0] != "/metrics":
            self.send_error(404)
            return
        try:
            body = self.exporter.render(type(self).clock()).encode()
        finally:
            connections.close_all()  # this thread's database connection must not outlive the request
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        return


class ExporterServer:
    """One node's exporter on 127.0.0.1, on a free port, served from a daemon thread."""

    def __init__(self, node: Node, clock: Clock = utcnow) -> None:
        self.exporter = NodeExporter(node)
        handler = type("Handler", (_Handler,), {"exporter": self.exporter, "clock": staticmethod(clock)})
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/metrics"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True, name=f"exporter-{node}")
        self.thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class ExporterPool:
    """The exporters of one simulated host cluster: {node name: server}."""

    def __init__(self, host_cluster: HostCluster, clock: Clock = utcnow) -> None:
        self.host_cluster = host_cluster
        nodes = Node.objects.filter(host_cluster=host_cluster).order_by("name")
        self.servers = {node.name: ExporterServer(node, clock) for node in nodes}

    @property
    def targets(self) -> dict[str, str]:
        return {name: server.url for name, server in self.servers.items()}

    def stop(self) -> None:
        for server in self.servers.values():
            server.stop()


_pools: dict[int, ExporterPool] = {}
_pools_lock = threading.Lock()


def pool_for(host_cluster: HostCluster) -> ExporterPool:
    """The process's exporters of a simulated host cluster, started on first use and kept running."""
    with _pools_lock:
        pool = _pools.get(host_cluster.pk)
        if pool is None or set(pool.servers) != set(
            Node.objects.filter(host_cluster=host_cluster).values_list("name", flat=True)
        ):
            if pool is not None:
                pool.stop()
            pool = _pools[host_cluster.pk] = ExporterPool(host_cluster)
        return pool


def stop_all() -> None:
    """Stop every exporter this process started (tests, shutdown)."""
    with _pools_lock:
        for pool in _pools.values():
            pool.stop()
        _pools.clear()
