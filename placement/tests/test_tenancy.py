"""Tenancy rules of the engine: GPU sharing by tier, dedicated nodes, MIG slices across tenants."""

import pytest

from placement.engine.errors import EngineError
from placement.engine.fleet import Tier
from placement.engine.placer import Engine
from placement.tests.factories import make_node, make_pod


def one_gpu_engine(policy: str = "best-fit") -> Engine:
    return Engine([make_node("n0", gpus=1)], policy)


@pytest.mark.parametrize("policy", ["best-fit", "fgd", "default", "random"])
def test_it_never_shares_a_gpu_between_standard_tenants(policy):
    engine = one_gpu_engine(policy)
    assert engine.place(make_pod("a", milli=300, tenant="alice", tier=Tier.STANDARD))
    assert engine.place(make_pod("b", milli=300, tenant="bob", tier=Tier.STANDARD)) is None
    assert engine.fleet.gpu_tenants("n0", 0) == {"alice"}


def test_it_lets_one_standard_tenant_share_its_own_gpu():
    engine = one_gpu_engine()
    engine.place(make_pod("a1", milli=300, tenant="alice", tier=Tier.STANDARD))
    assert engine.place(make_pod("a2", milli=300, tenant="alice", tier=Tier.STANDARD)).gpus == (0,)


def test_it_shares_a_gpu_between_two_trusted_tenants():
    engine = one_gpu_engine()
    engine.place(make_pod("a", milli=300, tenant="acme", tier=Tier.TRUSTED))
    assert engine.place(make_pod("b", milli=300, tenant="bigco", tier=Tier.TRUSTED))
    assert engine.fleet.gpu_tenants("n0", 0) == {"acme", "bigco"}


def test_it_does_not_put_a_trusted_tenant_beside_a_standard_one():
    engine = one_gpu_engine()
    engine.place(make_pod("a", milli=300, tenant="alice", tier=Tier.STANDARD))
    assert engine.place(make_pod("b", milli=300, tenant="acme", tier=Tier.TRUSTED)) is None


def test_it_frees_a_gpu_for_another_tenant_once_the_last_pod_leaves():
    engine = one_gpu_engine()
    engine.place(make_pod("a", milli=300, tenant="alice", tier=Tier.STANDARD))
    engine.release("a")
    assert engine.place(make_pod("b", milli=300, tenant="bob", tier=Tier.STANDARD))


def test_dedicated_nodes_take_only_their_tenants_pods():
    engine = Engine([make_node("n0"), make_node("n1")], "best-fit")
    engine.fleet.dedicate(["n0"], "secretco")
    iso = make_pod("iso", tenant="secretco", tier=Tier.ISOLATED)
    other = [make_pod(f"o{k}", tenant="alice", tier=Tier.STANDARD) for k in range(9)]
    assert engine.place(iso).node == "n0"
    placed = [engine.place(p) for p in other]
    assert [p.node for p in placed if p] == ["n1"] * 8
    assert placed[-1] is None  # n1 is full and n0 is not theirs


def test_an_isolated_tenant_never_lands_on_shared_nodes():
    engine = Engine([make_node("n0")], "best-fit")
    assert engine.place(make_pod("iso", tenant="secretco", tier=Tier.ISOLATED)) is None


def test_a_tenant_cannot_change_tier_under_the_engine():
    engine = one_gpu_engine()
    engine.place(make_pod("a", milli=300, tenant="alice", tier=Tier.STANDARD))
    with pytest.raises(EngineError, match="alice"):
        engine.place(make_pod("b", milli=300, tenant="alice", tier=Tier.TRUSTED))


def test_mig_slices_of_one_gpu_go_to_different_standard_tenants():
    engine = Engine([make_node("n0", gpus=1, model="h100-80gb")], "best-fit")
    engine.fleet.configure_mig("n0", 0, ["1g.10gb"] * 7)
    a = engine.place(make_pod("a", gpus=0, tenant="alice", tier=Tier.STANDARD, mig_profile="1g.10gb"))
    b = engine.place(make_pod("b", gpus=0, tenant="bob", tier=Tier.STANDARD, mig_profile="1g.10gb"))
    assert a
    assert b
    assert a.gpus == b.gpus == (0,)
    assert a.mig_slot != b.mig_slot


def test_a_mig_gpu_takes_no_fractional_pods():
    engine = Engine([make_node("n0", gpus=1, model="h100-80gb")], "best-fit")
    engine.fleet.configure_mig("n0", 0, ["3g.40gb", "3g.40gb"])
    assert engine.place(make_pod("share", milli=200)) is None


def test_a_pod_of_no_tenant_never_joins_a_tenants_gpu():
    engine = one_gpu_engine()
    engine.place(make_pod("a", milli=300, tenant="acme", tier=Tier.TRUSTED))
    assert engine.place(make_pod("system", milli=300)) is None
