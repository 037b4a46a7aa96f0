"""Properties of the integrator over random sample streams (hypothesis).

Round by round with the state persisted as JSON in between gives what one pass gives;
GPU-seconds and joules are conserved: every billed second of a device is somebody's
(platform idle included), exactly once.
"""

from __future__ import annotations

import itertools
import json
from collections import defaultdict
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from billing.dcgm import DeviceKey
from billing.metering import Holding, Integrator, PodLifecycle, Sample, Unseen

DEVICES = [DeviceKey("n", f"GPU-{i}", None) for i in range(3)]
PODS = [("a", "p1"), ("b", "p2"), ("c", "p3")]
MAX_GAP = 60.0

holding = st.builds(
    Holding,
    namespace=st.just(""),  # replaced below, so the pod identity stays consistent
    pod=st.just(""),
    fraction=st.sampled_from([None, None, 0.25, 0.5, 1.0]),
)


@st.composite
def streams(draw: st.DrawFn) -> list[tuple[DeviceKey, Sample]]:
    """Arrival-ordered samples: mostly advancing, with duplicates, late ones and gaps."""
    clocks = [0.0] * len(DEVICES)
    energy = [0.0] * len(DEVICES)
    out = []
    for _ in range(draw(st.integers(1, 40))):
        i = draw(st.integers(0, len(DEVICES) - 1))
        clocks[i] += draw(st.sampled_from([-20, 0, 7, 15, 30, 30, 30, 45, 60, 61, 200, 1790, 3600]))
        energy[i] = draw(st.sampled_from([energy[i], energy[i] + 1500.0, energy[i] + 64000.0, 500.0]))
        pods = draw(st.lists(st.sampled_from(PODS), max_size=3, unique=True))
        holders = tuple(Holding(ns, pod, draw(holding).fraction) for ns, pod in pods)
        util = draw(st.sampled_from([None, 0.0, 0.5, 1.0]))
        fraction = draw(st.sampled_from([1.0, 3 / 7]))
        out.append((DEVICES[i], Sample(clocks[i], holders, util, energy[i], fraction, ("H100", None))))
    return out


LIFECYCLE = {("c", "p3"): PodLifecycle(start=40.0, finish=3700.0)}


def one_pass(stream: list[tuple[DeviceKey, Sample]]) -> Integrator:
    integrator = Integrator(max_gap=MAX_GAP, lifecycle=LIFECYCLE)
    integrator.ingest_round(stream)
    return integrator


def totals(ledgers) -> dict[Any, list[float]]:
    out: dict[Any, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    for ledger in ledgers:
        for key, usage in ledger.items():
            cell = out[key]
            cell[0] += usage.gpu_seconds
            cell[1] += usage.util_gpu_seconds
            cell[2] += usage.joules
    return dict(out)


@settings(max_examples=60, deadline=None)
@given(stream=streams(), cuts=st.lists(st.integers(0, 40), max_size=5))
def test_round_by_round_with_persisted_state_equals_one_pass(stream, cuts):
    whole = one_pass(stream).drain()
    ledgers, gaps, late, duplicates = [], [], [], 0
    state = Integrator(max_gap=MAX_GAP).state()
    bounds = [0, *sorted(c for c in cuts if c < len(stream)), len(stream)]
    for start, end in itertools.pairwise(bounds):
        integrator = Integrator.from_state(
            json.loads(json.dumps(state)), max_gap=MAX_GAP, lifecycle=LIFECYCLE
        )
        integrator.ingest_round(stream[start:end])
        out = integrator.drain()
        ledgers.append(out.ledger)
        gaps += out.gaps
        late += out.late
        duplicates += out.duplicates
        state = integrator.state()
    merged, expected = totals(ledgers), totals([whole.ledger])
    assert merged.keys() == expected.keys()
    for key, cell in expected.items():
        assert merged[key] == pytest.approx(cell, rel=1e-9, abs=1e-9)
    assert (gaps, late, duplicates) == (whole.gaps, whole.late, whole.duplicates)


def _accepted(stream):
    """Per device, the samples the rule accepts: each strictly later than the last accepted."""
    kept: dict[DeviceKey, list[Sample]] = defaultdict(list)
    for device, sample in stream:
        if not kept[device] or sample.t > kept[device][-1].t:
            kept[device].append(sample)
    return kept


@settings(max_examples=60, deadline=None)
@given(stream=streams())
def test_every_billed_second_and_joule_of_a_device_is_somebodys_exactly_once(stream):
    ledger = one_pass(stream).ledger
    seconds: dict[DeviceKey, float] = defaultdict(float)
    joules: dict[DeviceKey, float] = defaultdict(float)
    for key, usage in ledger.items():
        seconds[key.device] += usage.gpu_seconds
        joules[key.device] += usage.joules
        assert usage.util_gpu_seconds <= usage.gpu_seconds + 1e-9
    for device, samples in _accepted(stream).items():
        billed = [(a, b) for a, b in itertools.pairwise(samples) if b.t - a.t <= MAX_GAP]
        assert seconds[device] == pytest.approx(sum(b.t - a.t for a, b in billed), abs=1e-9)
        expected_j = sum(
            ((b.energy_mj - a.energy_mj) if b.energy_mj >= a.energy_mj else b.energy_mj)
            / 1000
            * b.energy_fraction
            for a, b in billed
        )
        assert joules[device] == pytest.approx(expected_j, abs=1e-9)


@settings(max_examples=60, deadline=None)
@given(
    fractions=st.lists(st.sampled_from([None, 0.25, 0.5]), min_size=2, max_size=3),
    utils=st.tuples(st.sampled_from([None, 0.0, 0.5, 1.0]), st.sampled_from([None, 0.5, 1.0])),
    start=st.sampled_from([0.0, 3570.0, 3590.0]),
    step=st.sampled_from([10.0, 30.0, 60.0]),
)
def test_the_ledger_does_not_depend_on_the_order_holders_are_listed_in(fractions, utils, start, step):
    # Listing the same holders in another order takes the general path instead of the
    # shortcut for unchanged intervals; both must bill the same.
    holders = tuple(Holding(ns, pod, f) for (ns, pod), f in zip(PODS, fractions, strict=False))
    s0 = Sample(start, holders, utils[0], 1000.0, 1.0, ("H100", None))
    s1 = Sample(start + step, holders, utils[1], 61000.0, 1.0, ("H100", None))
    shortcut = one_pass([(DEVICES[0], s0), (DEVICES[0], s1)]).ledger
    general = one_pass([(DEVICES[0], s0), (DEVICES[0], s1._replace(holders=holders[::-1]))]).ledger
    expected = totals([shortcut])
    assert totals([general]).keys() == expected.keys()
    for key, cell in totals([general]).items():
        assert cell == pytest.approx(expected[key], rel=1e-9, abs=1e-9)


GHOSTS = [("g", f"u{i}") for i in range(3)]


@st.composite
def unseen_on_held_gpu(draw: st.DrawFn) -> tuple[tuple[Holding, ...], tuple[Holding, ...], list[Unseen]]:
    """Holders of one GPU at 0 s and 30 s (fractions declared or not), and pods the cluster says lived
    between."""
    fraction = st.sampled_from([None, 0.125, 0.25, 0.5, 0.75])
    first = tuple(
        Holding(ns, pod, draw(fraction)) for ns, pod in draw(st.lists(st.sampled_from(PODS), unique=True))
    )
    second = tuple(
        Holding(ns, pod, draw(fraction)) for ns, pod in draw(st.lists(st.sampled_from(PODS), unique=True))
    )
    ghosts = []
    for ns, pod in draw(st.lists(st.sampled_from(GHOSTS), unique=True)):
        start = draw(st.integers(0, 28))
        ghosts.append(Unseen(ns, pod, start, draw(st.integers(start + 1, 30)), draw(fraction)))
    return first, second, ghosts


@settings(max_examples=200, deadline=None)
@given(case=unseen_on_held_gpu())
def test_an_unseen_pod_never_changes_what_others_are_billed_nor_bills_the_gpu_twice(case):
    """Rule 3b on a GPU DCGM saw held: an unseen pod is billed its lifetime x its fraction, or nothing; the
    pods DCGM saw are billed as without it, and the GPU never bills more than its 30 s."""
    first, second, ghosts = case
    device = DEVICES[0]

    def billed(unseen: list[Unseen]) -> dict[tuple[str, str], float]:
        integrator = Integrator(max_gap=MAX_GAP, unseen={device.uuid: unseen})
        integrator.ingest_round([(device, Sample(0.0, first)), (device, Sample(30.0, second))])
        out: dict[tuple[str, str], float] = defaultdict(float)
        for key, usage in integrator.ledger.items():
            out[(key.namespace, key.pod)] += usage.gpu_seconds
        return out

    without, with_ghosts = billed([]), billed(ghosts)
    assert sum(with_ghosts.values()) == pytest.approx(30.0)
    for pod in {(h.namespace, h.pod) for h in (*first, *second)}:
        assert with_ghosts[pod] == pytest.approx(without[pod])
    for ghost in ghosts:
        got = with_ghosts.get((ghost.namespace, ghost.pod), 0.0)
        whole = (ghost.finish - ghost.start) * (ghost.fraction if ghost.fraction is not None else 1.0)
        if first or second:  # on an idle GPU, unseen pods that overlap share it (the first case of rule 3b)
            assert got in (pytest.approx(0.0), pytest.approx(whole))
