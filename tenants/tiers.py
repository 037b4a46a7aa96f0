"""Which kinds of GPU class each trust tier may hold: the one rule quota admission, trust-tier changes and
what-if all apply (docs/permissions.md, "Trust tiers").

`isolated` tenants get whole GPUs on nodes dedicated to them; `standard` tenants also MIG slices, which
are isolated in hardware; only `trusted` tenants get shared (time-sliced or HAMi) GPUs, whose memory and
faults are not isolated from other tenants.
"""

from __future__ import annotations

from fleet.models import GpuClass
from gpucloud.errors import TierForbidsClass
from tenants.models import Tenant

KINDS = {
    Tenant.TrustTier.ISOLATED: (GpuClass.Kind.WHOLE,),
    Tenant.TrustTier.STANDARD: (GpuClass.Kind.WHOLE, GpuClass.Kind.MIG),
    Tenant.TrustTier.TRUSTED: (
        GpuClass.Kind.WHOLE,
        GpuClass.Kind.MIG,
        GpuClass.Kind.SHARED,
        GpuClass.Kind.FRACTION,
    ),
}
RULE = (
    "isolated tenants get whole GPUs only; standard: whole GPUs or MIG slices; trusted: also shared GPUs "
    "(time-sliced or HAMi fractions)"
)


def allows(trust_tier: str, gpu_class: GpuClass) -> bool:
    return gpu_class.kind in KINDS[Tenant.TrustTier(trust_tier)]


def require_allowed(trust_tier: str, gpu_class: GpuClass, *, field: str = "gpu_class", who: str = "") -> None:
    """Refuse (422, naming the rule) a class the trust tier may not hold."""
    if allows(trust_tier, gpu_class):
        return
    subject = who or f"a {trust_tier} tenant"
    allowed = ", ".join(KINDS[Tenant.TrustTier(trust_tier)])
    message = (
        f"{subject} may not hold {gpu_class.name}, a {gpu_class.kind} class: {trust_tier} tenants get "
        f"{allowed} classes only ({RULE})"
    )
    raise TierForbidsClass(
        message,
        errors={field: [message]},
        trust_tier=trust_tier,
        gpu_class=gpu_class.name,
        allowed_kinds=list(KINDS[Tenant.TrustTier(trust_tier)]),
    )


def forbidden_classes(trust_tier: str, gpu_classes: list[GpuClass]) -> list[str]:
    """Names of the classes among these that the trust tier may not hold."""
    return sorted(c.name for c in gpu_classes if not allows(trust_tier, c))
