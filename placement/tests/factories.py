"""Builders for small fleets and pods used across the engine tests."""

from placement.engine.fleet import NodeSpec, PodRequest, Tier, Topology


def make_node(name: str, gpus: int = 8, model: str = "H100", cpu: int = 96_000, **topo: str) -> NodeSpec:
    """A node with enough memory that only CPU and GPUs matter."""
    return NodeSpec(name, cpu, 1_048_576, gpus, model, Topology(**topo))


def make_pod(
    name: str,
    gpus: int = 1,
    milli: int = 1000,
    tenant: str = "",
    tier: Tier = Tier.TRUSTED,
    cpu: int = 1000,
    **kw,
) -> PodRequest:
    """A pod asking for ``gpus`` x ``milli`` (0 GPUs = CPU only)."""
    return PodRequest(name, cpu, 1024, gpus, milli if gpus else 0, tenant=tenant, tier=tier, **kw)
