"""gpucloud's placement engine: pure Python (numpy), no Django. See docs/placement.md.

The Django side constructs an :class:`Engine` from :class:`NodeSpec` rows, then calls ``place``,
``place_gang``, ``release``, ``what_if`` and ``carve_pool``; MIG layouts come from :func:`plan_mig`.
"""

from scheduling.engine.errors import (
    EngineError,
    MalformedTraceRow,
    UnknownGpuModel,
    UnknownMigProfile,
    UnplaceablePod,
)
from scheduling.engine.fleet import LEVELS, Fleet, NodeSpec, Placement, PodRequest, Tier, Topology
from scheduling.engine.gang import GangRequest
from scheduling.engine.mig import MigGpu, MigPlan, lower_bound, plan_mig
from scheduling.engine.placer import Engine, WhatIf
from scheduling.engine.policies import POLICIES, make_policy

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
