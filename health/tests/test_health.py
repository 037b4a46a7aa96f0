"""Quarantined hardware is never used."""

from placement.engine.gang import GangRequest
from placement.engine.placer import Engine
from placement.tests.factories import make_node, make_pod


def test_it_never_places_on_a_quarantined_node():
    engine = Engine([make_node("bad", gpus=8), make_node("good", gpus=1)], "default")
    engine.fleet.quarantine_node("bad")
    assert engine.place(make_pod("p")).node == "good"
    assert engine.place(make_pod("q")) is None


def test_it_never_uses_a_quarantined_gpu():
    engine = Engine([make_node("n0", gpus=2)], "fgd")
    engine.fleet.quarantine_gpu("n0", 0)
    assert engine.place(make_pod("p", milli=500)).gpus == (1,)
    assert engine.place(make_pod("whole", gpus=2)) is None


def test_a_gang_skips_quarantined_nodes():
    engine = Engine([make_node(f"n{i}", rack="r0") for i in range(2)], "best-fit")
    engine.fleet.quarantine_node("n1")
    gang = GangRequest("g", (make_pod("a", gpus=8), make_pod("b", gpus=8)), level="rack")
    assert engine.place_gang(gang) is None


def test_a_node_back_from_quarantine_is_used_again():
    engine = Engine([make_node("n0", gpus=1)], "best-fit")
    engine.fleet.quarantine_node("n0")
    engine.fleet.quarantine_node("n0", quarantined=False)
    assert engine.place(make_pod("p")).node == "n0"
