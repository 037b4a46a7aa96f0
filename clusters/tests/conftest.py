"""Helpers for the clusters tests; the emulator fixtures (`kube_emulator`, `kube_client`) are shared, in
tests/fixtures.py."""

from __future__ import annotations

from typing import Any

from clusters.spec import QuotaSpec, TenantSpec

H200 = (("nvidia.com/gpu.product", "NVIDIA-H200"),)


def quota(gpu_class: str = "h200-141gb", resource: str = "nvidia.com/gpu", **kwargs: Any) -> QuotaSpec:
    values: dict[str, Any] = {"guaranteed": 4, "burst": 2, "lendable": None, "weight": 1, "node_labels": H200}
    values.update(kwargs)
    return QuotaSpec(gpu_class=gpu_class, resource_name=resource, **values)


def make_tenant(slug: str = "acme", **kwargs: Any) -> TenantSpec:
    """A tenant with two quotas: whole H200s and H200 MIG 1g.18gb slices."""
    values: dict[str, Any] = {
        "public_id": f"ten_{slug}",
        "trust_tier": "standard",
        "desired": "running",
        "namespace": f"tenant-{slug}",
        "quotas": (
            quota(),
            quota("h200-141gb.mig-1g.18gb", "nvidia.com/mig-1g.18gb", guaranteed=7, burst=0, lendable=3),
        ),
    }
    values.update(kwargs)
    return TenantSpec(slug=slug, **values)
