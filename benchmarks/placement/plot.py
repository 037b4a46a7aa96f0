"""The curves the FGD paper draws: unallocated GPU % against arrived workload %, one line per policy.

One PNG per workload (``<dir>/<workload>.png``): the mean over the seeds as a line, the seeds' min-max as a
shaded band, arrived 0-130 % of the fleet's GPU capacity. Needs matplotlib (the ``bench`` extra).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from placement.engine.errors import EngineError


def curves(
    out: Path,
    workloads: list[str],
    policies: list[str],
    runs: dict[tuple[str, str], dict[int, list[float]]],
    sets: dict[str, str],
) -> list[str]:
    """Write one PNG per workload and return their paths."""
    try:
        import matplotlib  # optional: only this command needs it

        matplotlib.use("Agg")
        from matplotlib import pyplot as plt
    except ImportError:
        raise EngineError("--plot needs matplotlib: pip install 'gpucloud[bench]'", "--plot") from None
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for w in workloads:
        fig, ax = plt.subplots(figsize=(6, 4), dpi=100)
        for policy in policies:
            seeds = runs[(w, policy)]
            arrived = np.arange(len(next(iter(seeds.values()))))
            # Unallocated capacity is read where arrivals have reached each mark: arrived - allocated.
            unallocated = np.array([arrived - np.array(c) for c in seeds.values()])
            ax.plot(arrived, unallocated.mean(axis=0), label=policy, linewidth=1.2)
            ax.fill_between(arrived, unallocated.min(axis=0), unallocated.max(axis=0), alpha=0.25)
        ax.set_xlim(0, 130)
        ax.set_xlabel("arrived workload (% of GPU capacity)")
        ax.set_ylabel("unallocated GPU (% of capacity)")
        ax.set_title(f"{w} ({sets[w]} set, {len(runs[(w, policies[0])])} seeds)")
        ax.grid(alpha=0.3)
        ax.legend()
        path = out / f"{w}.png"
        fig.savefig(path, bbox_inches="tight")
        plt.close(fig)
        written.append(str(path))
    return written
