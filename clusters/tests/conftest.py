"""Fixtures for driving the Kubernetes emulator through the real client."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from clusters.spec import QuotaSpec, TenantSpec
from gpucloud.kube.api import api_client_for_url
from tests.kube_emulator import RunningEmulator, start_emulator

ALL_CRDS = ("kueue", "kai", "flux", "vcluster-platform", "cilium", "gpu-operator")


@pytest.fixture
def kube_emulator() -> Iterator[RunningEmulator]:
    """An emulated API server on loopback serving every add-on's CRDs; `.url` is its address."""
    emulator = start_emulator(crds=ALL_CRDS)
    yield emulator
    emulator.stop()


@pytest.fixture
def kube_client(kube_emulator: RunningEmulator) -> Iterator[client.ApiClient]:
    """An official `kubernetes.client.ApiClient` pointed at the emulator."""
    api_client = api_client_for_url(kube_emulator.url)
    yield api_client
    api_client.close()


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
