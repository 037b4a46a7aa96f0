"""The FGD fragmentation measure and typical-pod distribution."""

import numpy as np
import pytest

from placement.engine.frag import cpu_fragmentation, fragmentation, typical_pods, weigh_by_contention
from placement.tests.factories import make_pod


def test_typical_pods_cover_the_popular_shapes_and_sum_to_one():
    pods = [make_pod(f"a{i}", milli=500) for i in range(90)] + [make_pod(f"b{i}", gpus=2) for i in range(10)]
    typ = typical_pods(pods, ["H100"], popularity=0.9)
    assert list(typ.milli) == [500]
    assert typ.freq.sum() == pytest.approx(1.0)
    typ = typical_pods(pods, ["H100"], popularity=0.95)
    assert list(typ.num) == [1, 2]
    assert list(typ.freq) == pytest.approx([0.9, 0.1])


def test_a_half_free_gpu_is_fragmented_for_whole_gpu_pods_only():
    pods = [make_pod("whole"), make_pod("half", milli=500)]
    typ = typical_pods(pods, ["H100"], popularity=1.0)
    cpu, model = np.array([96_000]), np.array([0])
    # One GPU with 500 free: the whole-GPU shape cannot use it (500 fragmented), the half shape can.
    assert fragmentation(typ, cpu, np.array([[500]]), model)[0] == pytest.approx(0.5 * 500)
    # A full free GPU serves both shapes: nothing fragmented.
    assert fragmentation(typ, cpu, np.array([[1000]]), model)[0] == 0


def test_gpus_on_a_node_without_cpu_are_all_fragmented():
    typ = typical_pods([make_pod("p", cpu=8000)], ["H100"], popularity=1.0)
    assert fragmentation(typ, np.array([4000]), np.array([[1000, 1000]]), np.array([0]))[0] == 2000


def test_a_shape_that_cannot_use_the_model_sees_all_gpus_as_fragmented():
    pod = make_pod("p", gpu_models=frozenset({"V100"}))
    typ = typical_pods([pod], ["H100", "V100"], popularity=1.0)
    gpu = np.array([[1000], [1000]])
    assert list(fragmentation(typ, np.array([96_000, 96_000]), gpu, np.array([0, 1]))) == [1000, 0]


def test_the_cpu_aware_measure_counts_gpus_the_free_cores_cannot_feed():
    typ = typical_pods([make_pod("p", cpu=12_000)], ["H100"], popularity=1.0)
    cpu, gpu, model = np.array([36_000]), np.full((1, 8), 1000), np.array([0])
    assert fragmentation(typ, cpu, gpu, model)[0] == 0  # one pod still fits: FGD sees nothing
    assert cpu_fragmentation(typ, cpu, gpu, model)[0] == 5000  # cores for 3 pods: 5 GPUs stranded


def test_the_cpu_aware_measure_agrees_with_fgd_when_cpu_is_plentiful():
    pods = [make_pod("whole", cpu=4000), make_pod("half", milli=500, cpu=4000), make_pod("cpu", gpus=0)]
    typ = typical_pods(pods, ["H100"], popularity=1.0)
    cpu, model = np.array([96_000, 96_000]), np.array([0, 0])
    gpu = np.array([[500, 1000, 0, -1], [1000, 1000, 1000, 1000]])
    assert list(cpu_fragmentation(typ, cpu, gpu, model)) == list(fragmentation(typ, cpu, gpu, model))


def test_a_barred_shape_strands_other_models_gpus_as_far_as_its_own_are_contended():
    pods = [make_pod(f"u{i}") for i in range(3)] + [make_pod("v", gpu_models=frozenset({"V100"}))]
    typ = typical_pods(pods, ["H100", "V100"], popularity=1.0)
    cpu, gpu, h100 = np.array([96_000]), np.array([[1000, 1000]]), np.array([0])
    assert fragmentation(typ, cpu, gpu, h100)[0] == 0.25 * 2000  # FGD: all of H100's free GPUs, for V100 pods
    # V100-only pods ask a quarter of the 8 GPUs' milli, 2000: half of V100's 4000.
    weighed = weigh_by_contention(typ, np.array([4000, 4000]))
    assert weighed.barred[1] == pytest.approx(0.5)
    assert fragmentation(weighed, cpu, gpu, h100)[0] == pytest.approx(0.25 * 0.5 * 2000)
    # Wanted beyond its capacity, V100 counts in full; no V100 in the fleet, the shape steers nothing.
    assert weigh_by_contention(typ, np.array([7000, 1000])).barred[1] == 1.0
    assert weigh_by_contention(typ, np.array([8000, 0])).barred[1] == 0.0
