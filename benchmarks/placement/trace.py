"""Readers for the Alibaba openb CSVs (cluster-trace-gpu-v2023) used by the FGD paper.

Node lists: ``sn,cpu_milli,memory_mib,gpu,model``. Pod lists: ``name,cpu_milli,memory_mib,num_gpu,gpu_milli``
followed, except in the ``multigpu*`` lists, by ``gpu_spec,qos,pod_phase,creation_time,deletion_time,
scheduled_time``. Anything else is rejected with the file, line and column at fault.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from placement.engine.errors import EngineError, MalformedTraceRow
from placement.engine.fleet import NodeSpec, PodRequest

NODE_COLUMNS = ["sn", "cpu_milli", "memory_mib", "gpu", "model"]
POD_COLUMNS_SHORT = ["name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"]
POD_COLUMNS_FULL = [
    *POD_COLUMNS_SHORT,
    "gpu_spec",
    "qos",
    "pod_phase",
    "creation_time",
    "deletion_time",
    "scheduled_time",
]


@dataclass(frozen=True)
class TracePod:
    """A pod of the trace with its lifetime (seconds; ``None`` when the list has no times)."""

    request: PodRequest
    created: int | None
    deleted: int | None


def _rows(path: Path, allowed: list[list[str]]) -> tuple[list[str], list[tuple[int, list[str]]]]:
    try:
        with open(path, newline="") as f:
            reader = csv.reader(f)
            header = next(reader, [])
            rows = [(n, row) for n, row in enumerate(reader, start=2) if row]
    except OSError as e:
        raise MalformedTraceRow(f"cannot read file: {e.strerror}", str(path)) from None
    if header not in allowed:
        expected = " or ".join(",".join(cols) for cols in allowed)
        raise MalformedTraceRow(f"columns are {','.join(header)!r}, expected {expected}", f"{path}:1")
    for n, row in rows:
        if len(row) != len(header):
            raise MalformedTraceRow(f"{len(row)} fields, expected {len(header)}", f"{path}:{n}")
    return header, rows


def _int(value: str, column: str, where: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise MalformedTraceRow(f"column {column} is {value!r}, not an integer", where) from None


def read_nodes(path: str | Path) -> list[NodeSpec]:
    """Nodes of an openb node list."""
    path = Path(path)
    _, rows = _rows(path, [NODE_COLUMNS])
    nodes = []
    for n, (sn, cpu, mem, gpu, model) in rows:
        where = f"{path}:{n}"
        nodes.append(
            NodeSpec(
                sn,
                _int(cpu, "cpu_milli", where),
                _int(mem, "memory_mib", where),
                _int(gpu, "gpu", where),
                model,
            )
        )
    return nodes


def read_pods(path: str | Path) -> list[TracePod]:
    """Pods of an openb pod list, in file order."""
    path = Path(path)
    header, rows = _rows(path, [POD_COLUMNS_FULL, POD_COLUMNS_SHORT])
    return [_pod(dict(zip(header, row, strict=True)), f"{path}:{n}") for n, row in rows]


def _pod(row: dict[str, str], where: str) -> TracePod:
    spec = row.get("gpu_spec", "")
    try:
        request = PodRequest(
            name=row["name"],
            cpu_milli=_int(row["cpu_milli"], "cpu_milli", where),
            memory_mib=_int(row["memory_mib"], "memory_mib", where),
            num_gpu=_int(row["num_gpu"], "num_gpu", where),
            gpu_milli=_int(row["gpu_milli"], "gpu_milli", where),
            gpu_models=frozenset(m for m in spec.split("|") if m),
        )
    except MalformedTraceRow:
        raise
    except EngineError as e:
        raise MalformedTraceRow(e.what, where) from None
    created = _time(row, "creation_time", where)
    deleted = _time(row, "deletion_time", where)
    return TracePod(request, created, deleted)


def _time(row: dict[str, str], column: str, where: str) -> int | None:
    value = row.get(column)
    return None if value in (None, "") else _int(value, column, where)
