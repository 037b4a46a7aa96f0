"""The FGD protocol with every placement asked over HTTP, as kube-scheduler asks the extender.

Per seed: the same shuffled fleet and arrival order as :func:`benchmarks.placement.openb.run_seed`, but the
engine sits behind gpucloud's extender server (``placement.extender.http``, the production server, on
loopback, with a bearer token) and this loop plays kube-scheduler with ``nodeCacheCapable: true``: for each
pod ``POST …/filter`` with every node name, then ``POST …/prioritize`` with the nodes that passed, then the
highest score wins (the cluster "binds" it; the extender has already assumed it). A pod no node passes is a
failure, as in the protocol. Each call's round trip is timed (client encoding and decoding included), and the
allocation curve is compared with the in-process run of the same seed, point by point.
"""

from __future__ import annotations

import argparse
import http.client
import json
import secrets
import statistics
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from benchmarks.placement.openb import SeedResult, arrival_order, curve, run_seed
from benchmarks.placement.trace import read_nodes, read_pods
from placement.engine.fleet import MILLI, NodeSpec, PodRequest
from placement.extender.http import ExtenderServer
from placement.extender.pods import GPU, GPU_MILLI, MODEL_LABEL
from placement.extender.state import Extender

CLUSTER = "openb"


def v1_pod(pod: PodRequest) -> dict[str, Any]:
    """The v1.Pod kube-scheduler would send for a trace pod."""
    requests = {"cpu": f"{pod.cpu_milli}m", "memory": f"{pod.memory_mib}Mi"}
    if pod.num_gpu:
        requests[GPU] = str(pod.num_gpu)
    spec: dict[str, Any] = {
        "containers": [{"name": "main", "resources": {"requests": requests, "limits": {}}}]
    }
    if pod.gpu_models:
        term = {
            "matchExpressions": [{"key": MODEL_LABEL, "operator": "In", "values": sorted(pod.gpu_models)}]
        }
        spec["affinity"] = {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}
        }
    meta: dict[str, Any] = {"name": pod.name, "namespace": CLUSTER}
    if pod.is_share:
        meta["annotations"] = {GPU_MILLI: str(pod.gpu_milli)}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


class _Client:
    """kube-scheduler's side: one persistent connection, the token, and the time of every call."""

    def __init__(self, url: str, token: str) -> None:
        host, port = url.removeprefix("http://").split(":")
        self.conn = http.client.HTTPConnection(host, int(port), timeout=10)
        self.headers = {"Content-Type": "application/json", "Authorization": f"Bearer {token}"}
        self.seconds: dict[str, list[float]] = {"filter": [], "prioritize": []}

    def call(self, verb: str, pod_json: str, names_json: str) -> object:
        body = f'{{"Pod":{pod_json},"NodeNames":{names_json}}}'.encode()
        start = time.perf_counter()
        self.conn.request("POST", f"/scheduler/v1/{CLUSTER}/{verb}", body, self.headers)
        response = self.conn.getresponse()
        answer = json.loads(response.read())
        self.seconds[verb].append(time.perf_counter() - start)
        if response.status != 200:
            raise RuntimeError(f"{verb} answered {response.status}: {answer}")
        return answer


def run_seed_via_extender(
    nodes: Sequence[NodeSpec], pods: Sequence[PodRequest], policy: str, seed: int, tune: float
) -> tuple[SeedResult, dict[str, list[float]]]:
    """One seed through the extender; the result and every call's round-trip seconds by verb."""
    start = time.perf_counter()
    nodes = [nodes[i] for i in np.random.default_rng(seed + 1_000_003).permutation(len(nodes))]
    extender = Extender(nodes, policy, workload=sorted(pods, key=lambda p: p.name), assume_seconds=1e9)
    token = secrets.token_urlsafe(24)
    server = ExtenderServer(
        ("127.0.0.1", 0), lambda name: extender if name == CLUSTER else None, lambda t: t == token
    )
    server.start()
    client = _Client(server.url, token)
    try:
        capacity = extender.fleet.total_gpus() * MILLI
        order = arrival_order(pods, capacity, seed, tune)
        names_json = json.dumps([n.name for n in nodes])
        arrived = np.zeros(len(order), dtype=np.int64)
        allocated = np.zeros(len(order), dtype=np.int64)
        got = failed = 0
        for n, pod in enumerate(order):
            pod_json = json.dumps(v1_pod(pod))
            passed = client.call("filter", pod_json, names_json)["NodeNames"]  # type: ignore[index]
            if passed:
                ranked: list[dict[str, Any]] = client.call("prioritize", pod_json, json.dumps(passed))  # type: ignore[assignment]
                best = max(ranked, key=lambda h: h["Score"])
                bound = extender.fleet.placements().get(f"{CLUSTER}/{pod.name}")
                if bound is None or bound.node != best["Host"]:
                    raise RuntimeError(f"{pod.name}: kube-scheduler would bind {best['Host']}, not {bound}")
                got += pod.total_gpu_milli
            else:
                failed += 1
            arrived[n] = (arrived[n - 1] if n else 0) + pod.total_gpu_milli
            allocated[n] = got
    finally:
        client.conn.close()
        server.shutdown()
        server.server_close()
    wall = round(time.perf_counter() - start, 2)
    return SeedResult(seed, curve(arrived, allocated, capacity), len(order), failed, wall), client.seconds


def _ms(values: list[float], q: float) -> float:
    return round(float(np.quantile(np.array(values), q)) * 1000, 3)


def run(args: argparse.Namespace) -> dict[str, Any]:
    """``openb --via-extender``: each seed in-process and over HTTP, side by side, with call latencies."""
    nodes = read_nodes(args.nodes)
    pods = [p.request for p in read_pods(args.pods)]
    rows = []
    latencies: dict[str, list[float]] = {"filter": [], "prioritize": []}
    for seed in args.seeds:
        local = run_seed(nodes, pods, args.policy, seed, args.tune)
        remote, seconds = run_seed_via_extender(nodes, pods, args.policy, seed, args.tune)
        for verb, values in seconds.items():
            latencies[verb].extend(values)
        row = {
            "seed": seed,
            "unallocated_in_process": round(100 - local.alloc_100, 3),
            "unallocated_via_extender": round(100 - remote.alloc_100, 3),
            "identical_curve": local.curve == remote.curve,
            "calls": sum(len(v) for v in seconds.values()),
            "wall_seconds": remote.wall_seconds,
            **{f"{verb}_ms_p50": _ms(v, 0.5) for verb, v in seconds.items()},
            **{f"{verb}_ms_p99": _ms(v, 0.99) for verb, v in seconds.items()},
        }
        rows.append(row)
        if not args.json:
            print(
                f"seed {seed}: unallocated@100 in-process {row['unallocated_in_process']:.2f} %  "
                f"via extender {row['unallocated_via_extender']:.2f} %  identical curve "
                f"{'yes' if row['identical_curve'] else 'NO'}  {row['calls']} calls  "
                f"filter p50/p99 {row['filter_ms_p50']:.2f}/{row['filter_ms_p99']:.2f} ms  "
                f"prioritize p50/p99 {row['prioritize_ms_p50']:.2f}/{row['prioritize_ms_p99']:.2f} ms",
                flush=True,
            )
    summary = {
        "workload": args.pods.stem,
        "policy": args.policy,
        "nodes": len(nodes),
        "seeds": rows,
        "all_identical": all(r["identical_curve"] for r in rows),
        "mean_unallocated_in_process": round(statistics.fmean(r["unallocated_in_process"] for r in rows), 3),
        "mean_unallocated_via_extender": round(
            statistics.fmean(r["unallocated_via_extender"] for r in rows), 3
        ),
        **{f"{verb}_ms_p50": _ms(v, 0.5) for verb, v in latencies.items()},
        **{f"{verb}_ms_p99": _ms(v, 0.99) for verb, v in latencies.items()},
    }
    if not args.json:
        print(
            f"{len(rows)} seeds, {summary['nodes']} nodes, {args.policy}: unallocated@100 in-process "
            f"{summary['mean_unallocated_in_process']:.2f} %, via extender "
            f"{summary['mean_unallocated_via_extender']:.2f} %, identical on every seed: "
            f"{'yes' if summary['all_identical'] else 'NO'}; "
            f"per call filter p50 {summary['filter_ms_p50']:.2f} ms "
            f"p99 {summary['filter_ms_p99']:.2f} ms, prioritize p50 {summary['prioritize_ms_p50']:.2f} ms "
            f"p99 {summary['prioritize_ms_p99']:.2f} ms"
        )
    return summary
