"""MIG geometry per GPU model, and the MIG planner.

Geometry follows NVIDIA's MIG placement rules: a GPU has 7 compute slices and 8 memory slices; each
profile occupies a run of memory slices that may start only at fixed positions (1g at 0-6, 1g double-memory
and 2g at even positions, 3g at 0 or 4, 4g and 7g at 0), instances may not overlap in memory, and their
compute slices add up to at most 7 (and, per NVIDIA's configuration tables, a 4g never sits beside a 3g).
Names per model come from mig-parted's default config
(reference/kubernetes-objects.md §5.3).

The planner turns per-class demand (``{"h200-141gb.mig-1g.18gb": 21, …}``, counting instances in use) and
the GPUs' current layouts into a layout per GPU: GPUs with running work keep their layout when possible,
idle GPUs whose current layout is useful keep theirs, and the rest of the demand is packed onto as few GPUs
as possible. Whatever cannot be satisfied is reported, never silently dropped.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache

from placement.engine.errors import EngineError, UnknownGpuModel, UnknownMigProfile

COMPUTE_SLICES, MEMORY_SLICES = 7, 8


@dataclass(frozen=True)
class MigProfile:
    """One MIG profile of one model: slices used, allowed start positions, instances per GPU at most."""

    name: str
    compute: int
    memory: int
    starts: tuple[int, ...]
    max_per_gpu: int


def _profiles(sizes: Mapping[str, str], with_me: bool = True) -> dict[str, MigProfile]:
    """Build a model's profiles from its memory-size labels per compute size (``1g2`` = 1g, double memory)."""
    table = [
        ("1g", 1, 1, (0, 1, 2, 3, 4, 5, 6), 7),
        ("1g2", 1, 2, (0, 2, 4, 6), 4),
        ("2g", 2, 2, (0, 2, 4), 3),
        ("3g", 3, 4, (0, 4), 2),
        ("4g", 4, 4, (0,), 1),
        ("7g", 7, 8, (0,), 1),
    ]
    out = {}
    for key, compute, memory, starts, most in table:
        name = f"{key[:2]}.{sizes[key]}"
        out[name] = MigProfile(name, compute, memory, starts, most)
    if with_me:
        me = f"1g.{sizes['1g']}+me"
        out[me] = MigProfile(me, 1, 1, (0, 1, 2, 3, 4, 5, 6), 1)
    return out


MODELS: dict[str, dict[str, MigProfile]] = {
    "a100-80gb": _profiles(
        {"1g": "10gb", "1g2": "20gb", "2g": "20gb", "3g": "40gb", "4g": "40gb", "7g": "80gb"}
    ),
    "h100-80gb": _profiles(
        {"1g": "10gb", "1g2": "20gb", "2g": "20gb", "3g": "40gb", "4g": "40gb", "7g": "80gb"}
    ),
    "h200-141gb": _profiles(
        {"1g": "18gb", "1g2": "35gb", "2g": "35gb", "3g": "71gb", "4g": "71gb", "7g": "141gb"}
    ),
    "b200-180gb": _profiles(
        {"1g": "23gb", "1g2": "45gb", "2g": "45gb", "3g": "90gb", "4g": "90gb", "7g": "180gb"}
    ),
}


def profile(model: str, name: str, where: str = "mig") -> MigProfile:
    """A model's profile by name, with clear errors for an unknown model or a profile it lacks."""
    profiles = MODELS.get(model)
    if profiles is None:
        raise UnknownGpuModel(f"no MIG geometry for GPU model {model!r}; known: {', '.join(MODELS)}", where)
    try:
        return profiles[name]
    except KeyError:
        raise UnknownMigProfile(
            f"{model} has no MIG profile {name!r}; it has {', '.join(profiles)}", where
        ) from None


def parse_class(gpu_class: str) -> tuple[str, MigProfile]:
    """``h200-141gb.mig-1g.18gb`` → (``h200-141gb``, its ``1g.18gb`` profile)."""
    model, sep, rest = gpu_class.partition(".mig-")
    if not sep:
        raise UnknownMigProfile(
            f"{gpu_class!r} is not a MIG class (expected <model>.mig-<profile>)", gpu_class
        )
    return model, profile(model, rest, gpu_class)


def placement(model: str, layout: Iterable[str]) -> list[tuple[str, int]] | None:
    """Start slice for each instance of a layout, or ``None`` if the layout is not valid on this model."""
    profs = sorted((profile(model, n) for n in layout), key=lambda p: (-p.memory, -p.compute, p.name))
    if sum(p.compute for p in profs) > COMPUTE_SLICES:
        return None
    counts = Counter(p.name for p in profs)
    if any(counts[p.name] > p.max_per_gpu for p in profs):
        return None
    computes = {p.compute for p in profs}
    if {3, 4} <= computes:  # NVIDIA's supported-configuration tables list no 4g + 3g combination
        return None
    return _assign(tuple(profs), 0, ())


def _assign(
    profs: tuple[MigProfile, ...], used: int, done: tuple[tuple[str, int], ...]
) -> list[tuple[str, int]] | None:
    """Depth-first search of start positions over a memory-slice bitmask."""
    if not profs:
        return list(done)
    head, rest = profs[0], profs[1:]
    for start in head.starts:
        mask = ((1 << head.memory) - 1) << start
        if start + head.memory <= MEMORY_SLICES and not used & mask:
            found = _assign(rest, used | mask, (*done, (head.name, start)))
            if found is not None:
                return found
    return None


def is_valid(model: str, layout: Iterable[str]) -> bool:
    """Whether a multiset of profiles can be configured together on one GPU of this model."""
    return placement(model, layout) is not None


@cache
def layouts(model: str) -> tuple[tuple[str, ...], ...]:
    """Every valid non-empty layout (as a sorted tuple of profile names) of a model."""
    names = sorted(MODELS[model])
    found: set[tuple[str, ...]] = set()

    def grow(current: tuple[str, ...], first: int) -> None:
        for k in range(first, len(names)):
            candidate = (*current, names[k])
            if is_valid(model, candidate):
                found.add(candidate)
                grow(candidate, k)

    grow((), 0)
    return tuple(sorted(found, key=lambda lay: (len(lay), lay)))


@dataclass(frozen=True)
class MigGpu:
    """A GPU as the planner sees it: current layout, and which of its instances run work now."""

    id: str
    model: str
    layout: tuple[str, ...] = ()
    busy: tuple[str, ...] = ()


@dataclass
class MigPlan:
    """Planner output: layout per GPU, GPUs whose layout changes (busy ones separately), shortfall."""

    layouts: dict[str, tuple[str, ...]] = field(default_factory=dict)
    reconfigured: list[str] = field(default_factory=list)
    reconfigured_busy: list[str] = field(default_factory=list)
    unsatisfied: dict[str, int] = field(default_factory=dict)

    @property
    def gpus_used(self) -> int:
        """GPUs that end up with at least one MIG instance."""
        return sum(1 for lay in self.layouts.values() if lay)


def plan_mig(demand: Mapping[str, int], gpus: Sequence[MigGpu]) -> MigPlan:
    """Choose MIG layouts that cover ``demand`` (instances per class, running ones included).

    Per model: (1) busy GPUs keep their layout; (2) the remaining demand is packed greedily onto layouts
    that waste the fewest compute slices, reusing idle GPUs' current layouts first; (3) if demand is still
    short, busy GPUs are grown to layouts that keep every busy instance. See the module docstring.
    """
    by_model: dict[str, Counter[str]] = {}
    for gpu_class, count in demand.items():
        if count < 0:
            raise EngineError(f"negative demand {count}", gpu_class)
        model, prof = parse_class(gpu_class)
        by_model.setdefault(model, Counter())[prof.name] += count
    for g in gpus:
        _check_gpu(g)
    plan = MigPlan(layouts={g.id: () for g in gpus})
    for model, want in by_model.items():
        _plan_model(model, want, [g for g in gpus if g.model == model], plan)
    for g in gpus:  # GPUs of models nobody asked for are left as they are
        if g.model not in by_model:
            plan.layouts[g.id] = g.layout
    for g in gpus:
        if tuple(sorted(plan.layouts[g.id])) != tuple(sorted(g.layout)):
            plan.reconfigured.append(g.id)
            if g.busy:
                plan.reconfigured_busy.append(g.id)
    return plan


def _check_gpu(g: MigGpu) -> None:
    if g.model not in MODELS:
        raise UnknownGpuModel(
            f"no MIG geometry for GPU model {g.model!r}; known: {', '.join(MODELS)}", f"gpu {g.id}"
        )
    if g.layout and not is_valid(g.model, g.layout):
        raise EngineError(f"current layout {g.layout} is not valid on {g.model}", f"gpu {g.id}")
    if Counter(g.busy) - Counter(g.layout):
        raise EngineError("busy instances are not part of the layout", f"gpu {g.id}")


def _plan_model(model: str, want: Counter[str], gpus: list[MigGpu], plan: MigPlan) -> None:
    left = Counter(want)
    busy = [g for g in gpus if g.busy]
    idle = [g for g in gpus if not g.busy]
    for g in busy:
        plan.layouts[g.id] = g.layout
        left -= Counter(g.layout)
    free_idle = list(idle)
    # Idle GPUs whose layout is already useful keep it: zero reconfiguration.
    for g in sorted(idle, key=lambda g: -_useful(g.layout, left, model)):
        if g.layout and _useful(g.layout, left, model) and _waste(g.layout, left, model) == 0:
            plan.layouts[g.id] = g.layout
            left -= Counter(g.layout)
            free_idle.remove(g)
    chosen = _pack(model, left)[: len(free_idle)]
    for layout in chosen:
        left -= Counter(layout)
    _assign_layouts(chosen, free_idle, plan)
    if +left:
        _grow_busy(model, busy, left, plan)
    for name, count in (+left).items():
        plan.unsatisfied[f"{model}.mig-{name}"] = count


def _pack(model: str, want: Counter[str]) -> list[tuple[str, ...]]:
    """Layouts covering ``want`` on as few GPUs as the better of two heuristics finds.

    Greedy-by-layout (most useful compute, least waste) and first-fit decreasing by instance size each miss
    the optimum on some mixes; taking the shorter of the two is cheap and closes most of the gap.
    """
    greedy: list[tuple[str, ...]] = []
    left = +want
    while left:
        best = _best_layout(model, left)
        if not _useful(best, left, model):
            break
        greedy.append(best)
        left -= Counter(best)
    ffd = _first_fit_decreasing(model, want)
    return min((greedy, ffd), key=len)


def _first_fit_decreasing(model: str, want: Counter[str]) -> list[tuple[str, ...]]:
    """Each instance, biggest first, into the first GPU whose layout stays valid, else a new GPU."""
    items = sorted(
        (+want).elements(), key=lambda n: (-profile(model, n).memory, -profile(model, n).compute, n)
    )
    bins: list[tuple[str, ...]] = []
    for name in items:
        for k, layout in enumerate(bins):
            if is_valid(model, (*layout, name)):
                bins[k] = tuple(sorted((*layout, name)))
                break
        else:
            bins.append((name,))
    return bins


def _assign_layouts(chosen: list[tuple[str, ...]], gpus: list[MigGpu], plan: MigPlan) -> None:
    """Give each chosen layout a GPU, preferring one that already has exactly that layout."""
    free = list(gpus)
    pending = []
    for layout in chosen:
        same = next((g for g in free if tuple(sorted(g.layout)) == tuple(sorted(layout))), None)
        if same is None:
            pending.append(layout)
        else:
            plan.layouts[same.id] = layout
            free.remove(same)
    for layout, g in zip(pending, free, strict=False):
        plan.layouts[g.id] = layout


def _useful(layout: Sequence[str], left: Counter[str], model: str) -> int:
    """Compute slices of a layout that serve remaining demand."""
    take = Counter(layout) & left
    return sum(profile(model, n).compute * c for n, c in take.items())


def _waste(layout: Sequence[str], left: Counter[str], model: str) -> int:
    return sum(profile(model, n).compute * c for n, c in (Counter(layout) - left).items())


def _best_layout(model: str, left: Counter[str]) -> tuple[str, ...]:
    """The layout serving the most remaining compute; ties: least waste, then fewest instances."""
    return max(
        layouts(model),
        key=lambda lay: (_useful(lay, left, model), -_waste(lay, left, model), -len(lay)),
    )


def _grow_busy(model: str, busy: list[MigGpu], left: Counter[str], plan: MigPlan) -> None:
    """Reconfigure busy GPUs to layouts that keep every running instance (last resort, one GPU at a time)."""
    for g in busy:
        if not +left:
            return
        keep = Counter(g.busy)
        pool = left + (Counter(g.layout) - keep)  # the old idle instances are up for grabs again

        def gain(lay: Sequence[str], keep: Counter[str] = keep, pool: Counter[str] = pool) -> int:
            return _useful(tuple((Counter(lay) - keep).elements()), pool, model)

        options = [lay for lay in layouts(model) if not keep - Counter(lay)]
        best = max(options, key=lambda lay: (gain(lay), -len(lay)))
        if gain(best) > gain(g.layout):
            plan.layouts[g.id] = best
            left.clear()
            left.update(pool - (Counter(best) - keep))


def lower_bound(demand: Mapping[str, int]) -> int:
    """⌈Σ compute slices / 7⌉ per model, summed: no plan can use fewer GPUs."""
    per_model: Counter[str] = Counter()
    for gpu_class, count in demand.items():
        model, prof = parse_class(gpu_class)
        per_model[model] += prof.compute * count
    return sum(-(-slices // COMPUTE_SLICES) for slices in per_model.values())
