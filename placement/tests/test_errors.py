"""Bad input ends in a clear error naming what and where, never deep in the engine."""

import pytest

from placement.engine.errors import UnknownGpuModel, UnknownMigProfile, UnplaceablePod
from placement.engine.placer import Engine
from placement.tests.factories import make_node, make_pod


def test_a_pod_wanting_more_gpus_than_any_node_has_is_named():
    engine = Engine([make_node("n0", gpus=8)], "default")
    with pytest.raises(UnplaceablePod, match=r"largest node has 8 GPUs.*pod greedy"):
        engine.place(make_pod("greedy", gpus=16))


def test_an_unknown_gpu_model_is_named():
    engine = Engine([make_node("n0", model="H100")], "default")
    with pytest.raises(UnknownGpuModel, match=r"TPU.*pod p"):
        engine.place(make_pod("p", gpu_models=frozenset({"TPU"})))


def test_a_mig_profile_the_model_lacks_is_named():
    engine = Engine([make_node("n0", gpus=1, model="h200-141gb")], "default")
    with pytest.raises(UnknownMigProfile, match=r"1g\.10gb"):
        engine.place(make_pod("p", gpus=0, mig_profile="1g.10gb", gpu_models=frozenset({"h200-141gb"})))


def test_a_pod_that_fits_later_is_not_an_error():
    engine = Engine([make_node("n0", gpus=1)], "default")
    engine.place(make_pod("a"))
    assert engine.place(make_pod("b")) is None
