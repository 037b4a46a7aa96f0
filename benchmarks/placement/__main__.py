"""Placement benchmarks (docs/placement.md): ``python -m benchmarks.placement openb|suite|gangs|…``."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from benchmarks.placement import (
    churn,
    extender_gangs,
    gangs,
    mig,
    openb,
    replay,
    suite,
    via_extender,
    workloads,
)
from placement.engine.errors import EngineError

ROOT = Path(__file__).resolve().parents[2]


def _trace_dir() -> Path:
    """``OPENB_TRACE_DIR``, else ``shared/`` beside the checkout or beside its parent (a worktree)."""
    if os.environ.get("OPENB_TRACE_DIR"):
        return Path(os.environ["OPENB_TRACE_DIR"])
    tail = Path("shared", "data", "traces", "alibaba-openb", "csv")
    found = [p / tail for p in (ROOT.parent, ROOT.parent.parent) if (p / tail).is_dir()]
    return found[0] if found else ROOT.parent / tail


TRACE_DIR = _trace_dir()
DEFAULT_NODES = TRACE_DIR / "openb_node_list_gpu_node.csv"
DEFAULT_PODS = TRACE_DIR / "openb_pod_list_default.csv"
PUBLISHED = TRACE_DIR.parent / "fgd-expected-results" / "analysis_allo_discrete.csv"


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
    p = argparse.ArgumentParser(prog="python -m benchmarks.placement", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    o = sub.add_parser("openb", help="FGD protocol on the Alibaba openb trace (arrivals only)")
    o.add_argument("--nodes", type=Path, default=DEFAULT_NODES)
    o.add_argument("--pods", type=Path, default=DEFAULT_PODS)
    o.add_argument("--policy", default="default")
    o.add_argument("--seeds", type=seeds, default=seeds("42-51"))
    o.add_argument("--tune", type=float, default=1.3)
    o.add_argument(
        "--via-extender",
        action="store_true",
        help="ask every placement over HTTP from the scheduler extender; compare with in-process",
    )
    o.add_argument("--json", action="store_true")
    s = sub.add_parser("suite", help="every published openb workload, against the published figures")
    s.add_argument("--policies", default="default,fgd,best-fit", help="comma-separated; the first is judged")
    s.add_argument("--nodes", type=Path, default=DEFAULT_NODES)
    s.add_argument("--trace-dir", type=Path, default=TRACE_DIR)
    s.add_argument("--published", type=Path, default=PUBLISHED)
    s.add_argument(
        "--set",
        default="published",
        help="comma-separated sets: published, validation, test (default: published)",
    )
    s.add_argument("--workloads", default="", help="comma-separated (default: every workload of the sets)")
    s.add_argument("--plot", type=Path, default=None, help="write PNG curves into this directory")
    s.add_argument("--seeds", type=seeds, default=seeds("42-51"))
    s.add_argument("--tune", type=float, default=1.3)
    s.add_argument("--jobs", type=int, default=2, help="processes")
    s.add_argument("--json", action="store_true")
    n = sub.add_parser("generate", help="an openb-style pod list from the base trace (or a whole set)")
    n.add_argument("--out", type=Path, required=True, help="a CSV file, or a directory with --set")
    n.add_argument("--set", choices=sorted(workloads.SETS), default=None, help="write every list of a set")
    n.add_argument("--seed", type=int, default=42)
    n.add_argument("--spec", type=float, default=0.0, help="%% of GPU pods constrained to a GPU model")
    n.add_argument("--share", type=float, default=None, help="%% of GPU milli in fractional pods")
    n.add_argument("--multi", type=float, default=None, help="%% of GPU milli in multi-GPU pods")
    n.add_argument("--cpu", type=float, default=None, help="%% of the fleet's cores asked by CPU-only pods")
    n.add_argument("--nodes", type=Path, default=DEFAULT_NODES)
    n.add_argument("--trace-dir", type=Path, default=TRACE_DIR)
    n.add_argument("--json", action="store_true")
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
    e = sub.add_parser("extender-gangs", help="openb multi-GPU pods as gangs through the extender, 3 ways")
    e.add_argument("--nodes", type=Path, default=DEFAULT_NODES)
    e.add_argument("--pods", type=Path, default=DEFAULT_PODS)
    e.add_argument("--policy", default="default")
    e.add_argument("--seeds", type=seeds, default=seeds("42-44"))
    e.add_argument("--tune", type=float, default=1.3)
    e.add_argument("--tick", type=float, default=1.0, help="seconds between arrivals")
    e.add_argument("--timeout", type=float, default=300.0, help="gang reservation timeout, seconds")
    e.add_argument("--together", action="store_true", help="a gang's pods arrive back to back")
    e.add_argument("--rack-nodes", type=int, default=8)
    e.add_argument("--block-racks", type=int, default=8)
    e.add_argument(
        "--modes", type=lambda t: t.split(","), default=list(extender_gangs.MODES), help="comma-separated"
    )
    e.add_argument("--json", action="store_true")
    m = sub.add_parser("mig", help="MIG planner against the lower bound and an exact solver")
    m.add_argument("--seeds", type=seeds, default=seeds("42-51"))
    m.add_argument("--json", action="store_true")
    c = sub.add_parser("mig-churn", help="MIG cost of change over a day of quota changes, 1,000 GPUs")
    c.add_argument("--seeds", type=seeds, default=seeds("42-44"))
    c.add_argument("--json", action="store_true")
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point; bad input ends with a one-line message and exit status 2."""
    args = parser().parse_args(argv)
    commands = {
        "openb": via_extender.run if getattr(args, "via_extender", False) else openb.run,
        "suite": suite.run,
        "replay": replay.run,
        "generate": workloads.run,
        "gangs": gangs.run,
        "extender-gangs": extender_gangs.run,
        "mig": mig.run,
        "mig-churn": churn.run,
    }
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
