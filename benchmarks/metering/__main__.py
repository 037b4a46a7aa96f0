"""Benchmark of one collection round of a simulated fleet: ``python -m benchmarks.metering ingest``.

Generates, in memory, the exposition text of every node of an N-GPU fleet with the real
exporter's label layout (the 25 default families, Kubernetes pod labels, a share of
MIG-partitioned GPUs), then times, with medians over rounds:

- the floor: ``bytes`` -> ``str`` decode and splitting into lines;
- ``billing.dcgm.parse`` alone, cold, and warm (a ``dcgm.Parser`` that saw the previous round);
- parse + attribute (samples per device, namespace -> tenant, model/profile -> class);
- one round of ``billing.metering.Integrator`` on those samples (1 device in 20 changes hands),
  and the JSON round trip of the integrator's state;
- ``prometheus_client.parser.text_string_to_metric_families`` on the same text.
"""

from __future__ import annotations

import argparse
import csv
import gc
import json
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from billing import dcgm, metering

COUNTERS_CSV = (
    Path(__file__).resolve().parents[2] / "billing/tests/fixtures/nvidia-dcgm-exporter-default-counters.csv"
)
GPUS_PER_NODE = 8
# Fields DCGM reports per MIG GPU instance; the rest stay on the parent GPU's row.
PER_INSTANCE = frozenset(
    {
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        "DCGM_FI_PROF_DRAM_ACTIVE",
        "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_DEV_FB_FREE",
        "DCGM_FI_DEV_FB_RESERVED",
    }
)
MIG_LAYOUTS = (
    (("3g.40gb", "1"), ("3g.40gb", "2")),
    (("4g.40gb", "1"), ("2g.20gb", "5"), ("1g.10gb", "9")),
    (("2g.20gb", "3"), ("2g.20gb", "4"), ("2g.20gb", "5"), ("1g.10gb", "13")),
)
MODELS = ("NVIDIA H100 80GB HBM3", "NVIDIA H200", "NVIDIA A100-SXM4-80GB")
BLANK = "9223372036854775794"


@dataclass(frozen=True, slots=True)
class Family:
    """One metric family of the counters file."""

    name: str
    kind: str
    help: str


def load_families(path: Path = COUNTERS_CSV) -> list[Family]:
    """The active (uncommented) metric families of a dcgm-exporter counters CSV."""
    families = []
    with path.open() as fh:
        for row in csv.reader(fh):
            if not row or row[0].lstrip().startswith("#") or len(row) < 3:
                continue
            name, kind, help_text = (cell.strip() for cell in row[:3])
            if kind != "label":
                families.append(Family(name, kind, help_text))
    return families


@dataclass(frozen=True, slots=True)
class Row:
    """One label set of a node: a whole GPU, a MIG parent or a MIG instance."""

    labels: str
    instance: bool  # a MIG instance row carries only PER_INSTANCE families
    parent_of_mig: bool


def _labels(host_label: str, host: str, gpu: int, uuid: str, model: str, mig: tuple[str, str] | None,
            pod: tuple[str, str] | None) -> str:  # fmt: skip
    bus = f"00000000:{0x53 + 0x11 * gpu:02X}:00.0"
    mig_part = f',GPU_I_PROFILE="{mig[0]}",GPU_I_ID="{mig[1]}"' if mig else ""
    ns, name = pod or ("", "")
    return (
        f'gpu="{gpu}",UUID="{uuid}",pci_bus_id="{bus}",device="nvidia{gpu}",modelName="{model}"{mig_part},'
        f'{host_label}="{host}",DCGM_FI_DRIVER_VERSION="580.105.08",container="{"main" if pod else ""}",'
        f'namespace="{ns}",pod="{name}",pod_uid=""'
    )


def _node_rows(rng: random.Random, node: int, mig_share: float, tenants: int) -> list[Row]:
    host = f"gpu-node-{node:05d}"
    # Both spellings of the host label are in the field (dcgm-exporter renamed it in 2026).
    host_label = "hostname" if node % 2 else "Hostname"
    model = MODELS[node % len(MODELS)]
    rows = []
    for gpu in range(GPUS_PER_NODE):
        uuid = f"GPU-{rng.getrandbits(128):032x}"
        uuid = f"{uuid[:12]}-{uuid[12:16]}-{uuid[16:20]}-{uuid[20:24]}-{uuid[24:]}"

        def pod(i: int, gpu: int = gpu) -> tuple[str, str] | None:
            if rng.random() < 0.15:
                return None  # idle GPU: the exporter still reports it, with empty pod labels
            return f"tenant-{rng.randrange(tenants):04d}", f"job-{node:05d}-{gpu}-{i}-7d9f8"

        if rng.random() < mig_share:
            rows.append(Row(_labels(host_label, host, gpu, uuid, model, None, None), False, True))
            for i, mig in enumerate(rng.choice(MIG_LAYOUTS)):
                rows.append(Row(_labels(host_label, host, gpu, uuid, model, mig, pod(i)), True, False))
        else:
            rows.append(Row(_labels(host_label, host, gpu, uuid, model, None, pod(0)), False, False))
    return rows


def _value(rng: random.Random, family: Family) -> str:
    name = family.name
    if name == "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION":
        return str(rng.randrange(10**9, 10**12))
    if name == "DCGM_FI_DEV_MEMORY_TEMP" and rng.random() < 0.5:
        return BLANK  # H100s report memory temperature as blank through many exporters
    if name.startswith("DCGM_FI_PROF_"):
        return f"{rng.random():.6f}"
    if name == "DCGM_FI_DEV_POWER_USAGE":
        return f"{rng.uniform(60, 700):.6f}"
    return str(rng.randrange(0, 101))


def node_exposition(rng: random.Random, node: int, families: list[Family], mig_share: float,
                    tenants: int) -> tuple[str, int]:  # fmt: skip
    """One node's ``/metrics`` body and its number of series."""
    rows = _node_rows(rng, node, mig_share, tenants)
    out: list[str] = []
    series = 0
    for family in families:
        out.append(f"# HELP {family.name} {family.help}\n# TYPE {family.name} {family.kind}\n")
        per_instance = family.name in PER_INSTANCE
        for row in rows:
            if row.instance != per_instance and (row.instance or row.parent_of_mig):
                continue
            out.append(f"{family.name}{{{row.labels}}} {_value(rng, family)}\n")
            series += 1
    return "".join(out), series


def fleet_round(gpus: int, mig_share: float, tenants: int = 400, seed: int = 1) -> tuple[bytes, int]:
    """All nodes' bodies of one round, concatenated, as the bytes a collector would hold."""
    rng = random.Random(seed)
    families = load_families()
    bodies, series = [], 0
    for node in range(1, gpus // GPUS_PER_NODE + 1):
        body, n = node_exposition(rng, node, families, mig_share, tenants)
        bodies.append(body)
        series += n
    return "".join(bodies).encode(), series


def attribute(
    result: dcgm.ParseResult, t: float, tenant_of: dict[str, str], class_of: dict[metering.GpuClassInput, str]
) -> list[tuple[str, str, metering.Sample]]:
    """What the ingest service does before integrating: samples, tenant and class per device."""
    out = []
    for _key, sample in metering.samples_from_exposition(result, t):
        gpu_class = class_of.get(sample.gpu_class)
        if gpu_class is None:  # the catalog look-up, once per (model, profile)
            gpu_class = class_of[sample.gpu_class] = _class_name(sample.gpu_class)
        tenant = tenant_of.get(sample.holders[0].namespace, "") if sample.holders else ""
        out.append((tenant, gpu_class, sample))
    return out


def _churn(
    samples: list[tuple[dcgm.DeviceKey, metering.Sample]],
) -> list[tuple[dcgm.DeviceKey, metering.Sample]]:
    """Between two rounds about one device in 20 changes hands, so the rule's general path runs too."""
    out = []
    for i, (key, sample) in enumerate(samples):
        if i % 20 == 0:
            holders = () if sample.holders else (metering.Holding("tenant-0001", f"new-{i}"),)
            sample = sample._replace(holders=holders)
        out.append((key, sample))
    return out


def _class_name(gpu_class: metering.GpuClassInput) -> str:
    model, profile = gpu_class
    base = model.split()[1].lower() if " " in model else model.lower()
    return f"{base}.{profile}" if profile else base


def _timed(fn: Callable[[], Any]) -> tuple[float, float]:
    """Wall and CPU seconds of one call. CPU time is reported too: the benchmark machine is
    shared, and waiting for a core shows in wall time only."""
    gc.collect()
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def _prometheus_client(text: str) -> int:
    return sum(len(family.samples) for family in text_string_to_metric_families(text))


def run(gpus: int, mig_share: float, rounds: int, prom_rounds: int) -> dict[str, Any]:
    """Generate one round and time each stage; medians in seconds."""
    started = time.perf_counter()
    data, series = fleet_round(gpus, mig_share)
    generated = time.perf_counter() - started
    text = data.decode()
    tenant_of = {f"tenant-{i:04d}": f"ten_{i:04d}" for i in range(400)}
    class_of: dict[metering.GpuClassInput, str] = {}
    result = dcgm.parse(text)
    base = metering.Integrator()
    base.ingest_round(metering.samples_from_exposition(result, 0.0))
    samples = _churn(metering.samples_from_exposition(result, 30.0))
    state = base.state()

    def integrate() -> None:
        integrator = metering.Integrator(last=dict(base.last))
        integrator.ingest_round(samples)

    def state_round_trip() -> None:
        metering.Integrator.from_state(json.loads(json.dumps(state))).state()

    warm = dcgm.Parser()
    warm.parse(text)
    # The harness's own objects (a parsed round, samples, the warm parser) are moved out of the
    # collector's reach, so collections triggered by the measured code do not rescan them; the
    # measured code itself runs with the collector on. A long-lived ingest worker can do the
    # same with gc.freeze() after start-up.
    gc.freeze()
    stages = (
        "decode",
        "split",
        "parse",
        "parse_warm",
        "parse_attribute",
        "integrate",
        "state_json",
        "prometheus_client",
    )
    calls: dict[str, Callable[[], Any]] = {
        "decode": data.decode,
        "split": lambda: text.split("\n"),
        "parse": lambda: dcgm.parse(text),
        "parse_warm": lambda: warm.parse(text),
        "parse_attribute": lambda: attribute(dcgm.parse(text), 30.0, tenant_of, class_of),
        "integrate": integrate,
        "state_json": state_round_trip,
        "prometheus_client": lambda: _prometheus_client(text),
    }
    times: dict[str, list[tuple[float, float]]] = {k: [] for k in stages}
    for i in range(max(rounds, prom_rounds)):
        for stage in stages:
            if i < (prom_rounds if stage == "prometheus_client" else rounds):
                times[stage].append(_timed(calls[stage]))
    wall = {k: statistics.median(w for w, _ in v) for k, v in times.items() if v}
    cpu = {k: statistics.median(c for _, c in v) for k, v in times.items() if v}
    prom = wall.get("prometheus_client")
    return {
        "gpus": gpus,
        "mig_share": mig_share,
        "rounds": rounds,
        "prometheus_client_rounds": prom_rounds,
        "series": series,
        "bytes": len(data),
        "devices": len(result.devices),
        "billable_devices": len(samples),
        "generate_s": generated,
        "median_wall_s": wall,
        "median_cpu_s": cpu,
        "us_per_series_wall": {k: v / series * 1e6 for k, v in wall.items()},
        "ratio_prometheus_client_over_parse": prom / wall["parse"] if prom else None,
        "ratio_prometheus_client_over_parse_attribute": prom / wall["parse_attribute"] if prom else None,
        "python": sys.version.split()[0],
        "machine": platform.machine(),
    }


def _print(report: dict[str, Any]) -> None:
    print(
        f"fleet: {report['gpus']} GPUs, MIG share {report['mig_share']}, {report['series']} series, "
        f"{report['bytes'] / 1e6:.1f} MB, {report['devices']} devices, {report['billable_devices']} billable "
        f"(generated in {report['generate_s']:.1f} s)"
    )
    print(f"medians over {report['rounds']} rounds (prometheus_client: {report['prometheus_client_rounds']})")
    print(f"  {'stage':<18} {'wall ms':>10} {'cpu ms':>10} {'wall us/series':>15}")
    wall, cpu, per_series = report["median_wall_s"], report["median_cpu_s"], report["us_per_series_wall"]
    for stage, seconds in wall.items():
        print(f"  {stage:<18} {seconds * 1000:10.1f} {cpu[stage] * 1000:10.1f} {per_series[stage]:15.3f}")
    for stage in ("parse", "parse_attribute"):
        ratio = report[f"ratio_prometheus_client_over_{stage}"]
        if ratio is not None:
            print(f"  prometheus_client / {stage}: {ratio:.1f}x (wall)")


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.metering")
    sub = parser.add_subparsers(dest="command", required=True)
    ingest = sub.add_parser("ingest", help="time parsing and attributing one collection round")
    ingest.add_argument("--gpus", type=int, default=10_000)
    ingest.add_argument("--mig-share", type=float, default=0.2)
    ingest.add_argument("--rounds", type=int, default=3)
    ingest.add_argument(
        "--prom-rounds",
        type=int,
        default=1,
        help="rounds of prometheus_client (about 30 s each at 10,000 GPUs)",
    )
    ingest.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    report = run(args.gpus, args.mig_share, args.rounds, args.prom_rounds)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        _print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
