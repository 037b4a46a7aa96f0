"""Helpers for the clusters tests and a host cluster registered on the Kubernetes emulator; the emulator
fixtures themselves (`kube_emulator`, `kube_client`) are shared, in tests/fixtures.py."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from clusters.spec import QuotaSpec, TenantSpec
from fleet.models import HostCluster
from gpucloud.kube.api import ApiStatusError
from tests.kube_emulator import RunningEmulator

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


def kubeconfig_for(url: str) -> str:
    """A kubeconfig of the cluster at `url`, signed in with a bearer token no answer may repeat."""
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": "host",
            "clusters": [{"name": "host", "cluster": {"server": url}}],
            "users": [{"name": "admin", "user": {"token": "host-admin-token"}}],
            "contexts": [{"name": "host", "context": {"cluster": "host", "user": "admin"}}],
        }
    )


def h200_node(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "nvidia.com/gpu.product": "NVIDIA-H200",
                "nvidia.com/gpu.count": "8",
                "nvidia.com/mig.capable": "true",
                "topology.kubernetes.io/zone": "zone-a",
                "example.com/topology-rack": "rack-1",
            },
        },
        "status": {"allocatable": {"nvidia.com/gpu": "8", "nvidia.com/mig-1g.18gb": "7"}},
    }


@pytest.fixture
def host(kube_emulator: RunningEmulator, api: Any, admin: Any, gpu_catalog: None) -> HostCluster:
    """A registered Kubernetes host cluster `gpu-east` with two 8 × H200 nodes, running Kueue."""
    for n in (1, 2):
        kube_emulator.put_object(h200_node(f"h200-{n}"))
    response = api(admin).post(
        "/api/v1/host-clusters/",
        {
            "name": "gpu-east",
            "driver": "kubernetes",
            "kubeconfig": kubeconfig_for(kube_emulator.url),
            "scheduler": "kueue",
        },
        format="json",
    )
    assert response.status_code == 201, response.json()
    return HostCluster.objects.get(name="gpu-east")


def status_of(fn: Any, *args: Any) -> int:
    """The HTTP status a call to the Kubernetes API got: 200, or the status of its ApiStatusError."""
    try:
        fn(*args)
    except ApiStatusError as exc:
        return exc.status
    return 200


def configmap(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"}}
