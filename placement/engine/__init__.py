"""gpucloud's placement engine: pure Python (numpy), no Django. See docs/placement.md.

The Django side constructs an :class:`Engine` from :class:`NodeSpec` rows, then calls ``place``,
``place_gang``, ``release``, ``what_if`` and ``carve_pool``; MIG layouts come from :func:`plan_mig`.
"""

from placement.engine.errors import (
    EngineError,
    MalformedTraceRow,
    UnknownGpuModel,
    UnknownMigProfile,
    UnplaceablePod,
)
from placement.engine.fleet import LEVELS, Fleet, NodeSpec, Placement, PodRequest, Tier, Topology
from placement.engine.gang import GangRequest
from placement.engine.mig import MigGpu, MigPlan, lower_bound, plan_mig
from placement.engine.placer import Engine, WhatIf
from placement.engine.policies import POLICIES, make_policy

__all__ = [
    "LEVELS",
    "POLICIES",
    "Engine",
    "EngineError",
    "Fleet",
    "GangRequest",
    "MalformedTraceRow",
    "MigGpu",
    "MigPlan",
    "NodeSpec",
    "Placement",
    "PodRequest",
    "Tier",
    "Topology",
    "UnknownGpuModel",
    "UnknownMigProfile",
    "UnplaceablePod",
    "WhatIf",
    "lower_bound",
    "make_policy",
    "plan_mig",
]
