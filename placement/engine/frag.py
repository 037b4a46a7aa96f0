"""GPU fragmentation as defined by FGD (Weng et al., USENIX ATC '23), vectorised over node states.

A node's fragmentation is the GPU capacity that a *typical* pod, drawn from the workload's popular shapes,
could not use: all of the node's free GPU milli when the pod cannot land there at all (too little CPU, too
few GPUs with enough free milli, wrong model), otherwise only the milli on GPUs too full for it. The
expectation over the typical-pod distribution is the node's fragmentation; FGD places each pod where that
expectation grows least. Memory plays no part in the measure (as in the paper), only in the fit test.

:func:`cpu_fragmentation` is gpucloud's CPU-aware variant: FGD asks only whether *one* typical pod still fits
a node's CPU, so a node with eight free GPUs and cores for one pod looks whole. The variant caps what each
shape can use by the copies of it the node's free CPU can host; the rest of the free GPU milli counts as
fragmented.

:func:`weigh_by_contention` is gpucloud's model-aware change: FGD counts every free GPU of a model a shape may
not use as stranded for that shape, so using any such GPU earns the same bonus, however it splits its node.
Weighted by contention, a shape's barred GPUs count only as far as the models it may use are wanted by
model-constrained pods.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from placement.engine.fleet import MILLI, PodRequest

POPULARITY = 0.95  # the paper's typical-pod threshold: shapes covering 95 % of pods


@dataclass(frozen=True)
class TypicalPods:
    """The typical-pod distribution: one row per shape, ``freq`` summing to 1."""

    cpu: np.ndarray  # milli-CPU per shape
    milli: np.ndarray  # GPU milli per GPU (0 for CPU-only shapes)
    num: np.ndarray  # GPUs per pod
    freq: np.ndarray  # probability of the shape
    access: np.ndarray  # [shape, fleet model] bool: may the shape use that model?
    barred: np.ndarray  # per shape, the share of a barred node's free milli it strands (FGD: all, 1.0)


def _shape(pod: PodRequest) -> tuple[int, int, int, str]:
    return (pod.cpu_milli, pod.gpu_milli, pod.num_gpu, "|".join(sorted(pod.gpu_models)))


def typical_pods(
    pods: Sequence[PodRequest], models: Sequence[str], popularity: float = POPULARITY, gpu_weight: float = 0.0
) -> TypicalPods:
    """Most frequent pod shapes covering ``popularity`` of the pods, renormalised (CPU-only pods included).

    Shapes are ranked by count, ties by (cpu, milli, num, models) descending, as the authors' simulator does.
    ``gpu_weight`` > 0 counts a pod as ``1 + gpu_weight x GPUs`` instead of 1, so that shapes holding more
    GPUs weigh more (the simulator's ``gpuResWeight``, extended to shares).
    """
    counts: dict[tuple[int, int, int, str], float] = defaultdict(float)
    for p in pods:
        counts[_shape(p)] += 1 + gpu_weight * p.total_gpu_milli / 1000
    ranked = sorted(counts.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)
    total, cum, chosen = sum(counts.values()), 0.0, []
    for shape, n in ranked:
        if cum >= popularity * total:
            break
        chosen.append((shape, n))
        cum += n
    freq = np.array([n for _, n in chosen], dtype=np.float64) / cum
    access = np.array([[not spec or m in spec.split("|") for m in models] for (_, _, _, spec), _ in chosen])
    return TypicalPods(
        cpu=np.array([s[0] for s, _ in chosen], dtype=np.int64),
        milli=np.array([s[1] for s, _ in chosen], dtype=np.int64),
        num=np.array([s[2] for s, _ in chosen], dtype=np.int64),
        freq=freq,
        access=access.reshape(len(chosen), len(models)),
        barred=np.ones(len(chosen)),
    )


def weigh_by_contention(typ: TypicalPods, capacity: np.ndarray) -> TypicalPods:
    """The same shapes, each barred from a model only as far as the models it may use are contended.

    ``capacity`` is the fleet's GPU milli per model. With arrivals filling the fleet, each shape asks its
    share of the GPU milli; a model-constrained shape spreads its ask over the models it accepts in
    proportion to their capacity, so each model's *load* is the share of its capacity that constrained
    pods want. A shape's weight is the capacity-weighted load of its models, at most 1: a free GPU of
    another model is stranded for it in full only where its own models are wanted in full. Unconstrained
    shapes are barred nowhere; a shape no model of the fleet accepts weighs 0 (it steers nothing).
    """
    capacity = capacity.astype(np.float64)
    ask = typ.freq * typ.milli * typ.num
    demand = ask / max(float(ask.sum()), 1.0) * capacity.sum()
    supply = typ.access @ capacity  # [shape] capacity of the models the shape accepts
    constrained = ~typ.access.all(axis=1)
    spread = np.where(constrained, demand / np.maximum(supply, 1.0), 0.0)
    load = spread @ typ.access  # [model] constrained ask per unit of capacity
    weight = typ.access @ (capacity * load) / np.maximum(supply, 1.0)
    return replace(typ, barred=np.minimum(weight, 1.0))


def fragmentation(typ: TypicalPods, cpu: np.ndarray, gpu: np.ndarray, model: np.ndarray) -> np.ndarray:
    """Expected fragmented GPU milli of K node states.

    ``cpu`` [K] free milli-CPU, ``gpu`` [K, slots] free milli per GPU (negative = no usable GPU there),
    ``model`` [K] index into the fleet's model list (-1 = no GPU).
    """
    return _expected_stranded(typ, cpu, gpu, model, cpu_caps_copies=False)


def cpu_fragmentation(typ: TypicalPods, cpu: np.ndarray, gpu: np.ndarray, model: np.ndarray) -> np.ndarray:
    """Like :func:`fragmentation`, but a shape uses at most as much GPU as the node's CPU has room for.

    Per shape: the milli on GPUs it fits, capped at ``copies x milli x num`` where ``copies`` is how many pods
    of the shape the free CPU could host. Measured: judging CPU-only pods by this measure is what lifts the
    CPU-heavy openb workloads (docs/benchmarks-placement.md); judging GPU pods by it too opens empty nodes and
    starves 8-GPU pods, so the default policy uses it for GPU pods only to break ties.
    """
    return _expected_stranded(typ, cpu, gpu, model, cpu_caps_copies=True)


def _expected_stranded(
    typ: TypicalPods, cpu: np.ndarray, gpu: np.ndarray, model: np.ndarray, cpu_caps_copies: bool
) -> np.ndarray:
    """Per node state: the free milli each shape could not use, weighted by the shapes' frequencies.

    A shape that cannot land at all strands all free milli (only its ``barred`` share of it when the node's
    model is one it may not use); one that can uses the milli on GPUs with room for it, and with
    ``cpu_caps_copies`` no more than the free CPU can feed copies of it.
    """
    free = np.maximum(gpu, 0)
    total = free.sum(axis=1).astype(np.float64)  # [K]
    if not len(typ.freq):
        nothing: np.ndarray = total * 0.0
        return nothing
    # Shapes share few GPU sizes (the openb default: 91 shapes, 22 sizes): which GPUs have room is worked
    # out once per size, [K, sizes, slots], and read per shape.
    sizes, size_of = np.unique(np.maximum(typ.milli, 1), return_inverse=True)
    fits = gpu[:, None, :] >= sizes[None, :, None]
    hosts = fits.sum(axis=2)[:, size_of] >= typ.num[None, :]
    cpu_ok = cpu[:, None] >= typ.cpu[None, :]
    access = typ.access[:, np.maximum(model, 0)].T & (model >= 0)[:, None]
    satisfied = hosts & cpu_ok & access & (typ.milli > 0)[None, :]
    usable = np.where(fits, free[:, None, :], 0).sum(axis=2)[:, size_of]  # milli on GPUs with room for it
    if cpu_caps_copies:
        copies = cpu[:, None] // np.maximum(typ.cpu, 1)[None, :]
        copies = np.where(typ.cpu[None, :] > 0, copies, np.iinfo(np.int64).max // MILLI**2)
        usable = np.minimum(usable, copies * (typ.milli * typ.num)[None, :])
    stranded = np.where(access, 1.0, typ.barred[None, :]) * total[:, None]  # a barred shape: its share only
    per_shape = np.where(satisfied, total[:, None] - usable, stranded)
    stranded_per_node: np.ndarray = per_shape @ typ.freq
    return stranded_per_node
