"""Plain values to render from: a tenant's spec with whole-GPU and MIG quotas."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from clusters.spec import QuotaSpec, TenantSpec

H200 = (("nvidia.com/gpu.product", "NVIDIA-H200"),)


def quota(gpu_class: str = "h200-141gb", resource: str = "nvidia.com/gpu", **kwargs: Any) -> QuotaSpec:
    values: dict[str, Any] = {"guaranteed": 4, "burst": 2, "lendable": None, "weight": 1, "node_labels": H200}
    values.update(kwargs)
    return QuotaSpec(gpu_class=gpu_class, resource_name=resource, **values)


MIG = quota("h200-141gb.mig-1g.18gb", "nvidia.com/mig-1g.18gb", guaranteed=7, burst=0, lendable=3, weight=3)


@pytest.fixture
def make_tenant() -> Callable[..., TenantSpec]:
    def make(slug: str = "acme", **kwargs: Any) -> TenantSpec:
        values: dict[str, Any] = {
            "public_id": f"ten_{slug}",
            "trust_tier": "standard",
            "desired": "running",
            "namespace": f"tenant-{slug}",
            "quotas": (quota(), MIG),
        }
        values.update(kwargs)
        return TenantSpec(slug=slug, **values)

    return make
