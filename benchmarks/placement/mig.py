"""MIG planner benchmark: GPUs used against the lower bound ceil(slices / 7) and an exact solver's optimum.

Random demand mixes per seed on fresh H100 GPUs (no current layouts). The exact optimum of "fewest GPUs" is
an integer programme over the model's valid layouts (x_l = GPUs configured with layout l, minimise the sum
subject to covering every profile's demand), solved with HiGHS (``highspy``, a dev dependency).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from placement.engine.mig import MODELS, MigGpu, layouts, lower_bound, plan_mig

T = TypeVar("T")
MODEL = "h100-80gb"
PROFILES = ["1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"]


def random_demand(rng: np.random.Generator, scale: int) -> dict[str, int]:
    """A random mix: each profile present with probability 0.6, counts up to ``scale``."""
    demand = {f"{MODEL}.mig-{p}": int(rng.integers(1, scale + 1)) for p in PROFILES if rng.random() < 0.6}
    return demand or {f"{MODEL}.mig-1g.10gb": 1}


def exact_gpus(demand: dict[str, int]) -> int | None:
    """Fewest GPUs covering the demand, by integer programming (None if highspy is missing)."""
    try:
        import highspy
    except ImportError:
        return None
    want = Counter({cls.split(".mig-")[1]: n for cls, n in demand.items()})
    options = layouts(MODEL)
    h = _quiet(highspy.Highs)
    h.setOptionValue("output_flag", False)
    for _ in options:
        h.addVar(0, highspy.kHighsInf)
        h.changeColCost(h.getNumCol() - 1, 1.0)
        h.changeColIntegrality(h.getNumCol() - 1, highspy.HighsVarType.kInteger)
    for name, count in want.items():
        cols = [k for k, lay in enumerate(options) if name in lay]
        vals = [float(options[k].count(name)) for k in cols]
        h.addRow(float(count), highspy.kHighsInf, len(cols), np.array(cols, dtype=np.int32), np.array(vals))
    h.run()
    return round(h.getInfo().objective_function_value)


def _quiet(make: Callable[[], T]) -> T:
    """Call ``make`` with file descriptor 1 silenced: HiGHS prints a banner from C++ on construction."""
    sys.stdout.flush()
    saved = os.dup(1)
    with open(os.devnull, "w") as null:
        os.dup2(null.fileno(), 1)
        try:
            return make()
        finally:
            os.dup2(saved, 1)
            os.close(saved)


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Planner vs lower bound on large mixes, and vs the exact optimum on small ones."""
    assert MODEL in MODELS
    rows = []
    for seed in args.seeds:
        rng = np.random.default_rng(seed)
        for scale, label in ((6, "small"), (40, "large")):
            demand = random_demand(rng, scale)
            start = time.perf_counter()
            plan = plan_mig(demand, [MigGpu(f"gpu-{k}", MODEL) for k in range(400)])
            wall = time.perf_counter() - start
            exact = exact_gpus(demand)
            rows.append(
                {
                    "seed": seed,
                    "size": label,
                    "demand": demand,
                    "planner": plan.gpus_used,
                    "lower_bound": lower_bound(demand),
                    "exact": exact,
                    "unsatisfied": plan.unsatisfied,
                    "planner_ms": round(wall * 1000, 1),
                }
            )
    small = [r for r in rows if r["exact"] is not None]
    summary = {
        "instances": len(rows),
        "mean_planner_over_bound": round(statistics.fmean(r["planner"] / r["lower_bound"] for r in rows), 4),
        "planner_equals_bound": sum(r["planner"] == r["lower_bound"] for r in rows),
        "instances_with_exact": len(small),
        "planner_equals_exact": sum(r["planner"] == r["exact"] for r in small),
        "max_planner_minus_exact": max((r["planner"] - r["exact"] for r in small), default=None),
        "exact_above_bound": sum(r["exact"] > r["lower_bound"] for r in small),
        "rows": rows,
    }
    if not args.json:
        for r in rows:
            print(
                f"seed {r['seed']} {r['size']:5}: planner {r['planner']:3} GPUs, "
                f"bound {r['lower_bound']:3}, exact {r['exact']}, {r['planner_ms']} ms"
            )
        print({k: v for k, v in summary.items() if k != "rows"})
    return summary
