"""Placement benchmarks: ``python -m scheduling.bench {openb,replay,gangs,mig} …`` (see docs/placement.md)."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from scheduling.bench import gangs, mig, replay
from scheduling.engine.errors import EngineError
from scheduling.engine.trace import read_nodes, read_pods

ROOT = Path(__file__).resolve().parents[2]
TRACE_DIR = ROOT / ".." / "shared" / "data" / "traces" / "alibaba-openb" / "csv"
DEFAULT_NODES = TRACE_DIR / "openb_node_list_gpu_node.csv"
DEFAULT_PODS = TRACE_DIR / "openb_pod_list_default.csv"


def seeds(text: str) -> list[int]:
    """``42-51`` or ``42,45,47`` → list of seeds."""
    try:
        if "-" in text:
            lo, hi = (int(x) for x in text.split("-", 1))
            return list(range(lo, hi + 1))
        return [int(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"seeds must look like 42-51 or 42,43, not {text!r}") from None


def parser() -> argparse.ArgumentParser:
    """The command line."""
    p = argparse.ArgumentParser(prog="python -m scheduling.bench", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    o = sub.add_parser("openb", help="FGD protocol on the Alibaba openb trace (arrivals only)")
    o.add_argument("--nodes", type=Path, default=DEFAULT_NODES)
    o.add_argument("--pods", type=Path, default=DEFAULT_PODS)
    o.add_argument("--policy", default="default")
    o.add_argument("--seeds", type=seeds, default=seeds("42-51"))
    o.add_argument("--tune", type=float, default=1.3)
    o.add_argument("--json", action="store_true")
    r = sub.add_parser("replay", help="replay a trace with creation and deletion times")
    r.add_argument("--nodes", type=Path, default=DEFAULT_NODES)
    r.add_argument("--pods", type=Path, default=DEFAULT_PODS)
    r.add_argument("--policy", default="default")
    r.add_argument("--seed", type=int, default=42)
    r.add_argument("--stretch", type=float, default=1.0, help="multiply every pod lifetime (raises the load)")
    r.add_argument("--json", action="store_true")
    g = sub.add_parser("gangs", help="topology-aware gang placement on a synthetic 1,024-GPU fleet")
    g.add_argument("--seeds", type=seeds, default=seeds("42-46"))
    g.add_argument("--json", action="store_true")
    m = sub.add_parser("mig", help="MIG planner against the lower bound and an exact solver")
    m.add_argument("--seeds", type=seeds, default=seeds("42-51"))
    m.add_argument("--json", action="store_true")
    return p


def run_openb(args: argparse.Namespace) -> dict:
    """Run the FGD protocol for every seed and print per-seed lines (unless --json)."""
    from scheduling.bench.openb import run_seed

    nodes = read_nodes(args.nodes)
    pods = [p.request for p in read_pods(args.pods)]
    results = []
    for seed in args.seeds:
        r = run_seed(nodes, pods, args.policy, seed, args.tune)
        results.append(r)
        if not args.json:
            print(
                f"seed {seed}: alloc@100 {r.alloc_100:6.2f} %  alloc@130 {r.alloc_130:6.2f} %  "
                f"unallocated@100 {100 - r.alloc_100:5.2f} %  failed {r.failed_pods}/{r.arrived_pods}  "
                f"wall {r.wall_seconds:.1f} s",
                flush=True,
            )
    summary = {
        "workload": args.pods.stem,
        "policy": args.policy,
        "tune": args.tune,
        "seeds": args.seeds,
        "mean_alloc_100": round(statistics.fmean(r.alloc_100 for r in results), 3),
        "mean_alloc_130": round(statistics.fmean(r.alloc_130 for r in results), 3),
        "mean_unallocated_100": round(100 - statistics.fmean(r.alloc_100 for r in results), 3),
        "min_alloc_100": min(r.alloc_100 for r in results),
        "max_alloc_100": max(r.alloc_100 for r in results),
        "mean_wall_seconds": round(statistics.fmean(r.wall_seconds for r in results), 2),
    }
    if args.json:
        summary["runs"] = [
            {
                "seed": r.seed,
                "curve": r.curve,
                "failed_pods": r.failed_pods,
                "arrived_pods": r.arrived_pods,
                "wall_seconds": r.wall_seconds,
            }
            for r in results
        ]
        curves = [r.curve for r in results]
        summary["mean_curve"] = [
            round(statistics.fmean(c[k] for c in curves), 3) for k in range(len(curves[0]))
        ]
    else:
        print(
            f"mean ({len(results)} seeds) {summary['workload']} {args.policy}: "
            f"alloc@100 {summary['mean_alloc_100']:.2f} %  alloc@130 {summary['mean_alloc_130']:.2f} %  "
            f"unallocated@100 {summary['mean_unallocated_100']:.2f} %  "
            f"band alloc@100 {summary['min_alloc_100']:.2f}-{summary['max_alloc_100']:.2f}  "
            f"wall {summary['mean_wall_seconds']:.1f} s/seed"
        )
    return summary


def main(argv: list[str] | None = None) -> int:
    """Entry point; bad input ends with a one-line message and exit status 2."""
    args = parser().parse_args(argv)
    commands = {"openb": run_openb, "replay": replay.run, "gangs": gangs.run, "mig": mig.run}
    try:
        summary = commands[args.command](args)
    except EngineError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
