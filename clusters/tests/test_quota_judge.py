"""The quota judge (tests/judges/quota.py): ResourceQuota arithmetic against what gpucloud rendered.

A pod asking for any GPU resource the cluster offers and its tenant holds none of is refused with 0; the
per-model limits hold as each scheduler allows (clusters/render/resourcequota.py).
"""

from __future__ import annotations

from typing import Any

import pytest

from clusters.render import ClusterProfile, render_shared, render_tenant
from clusters.spec import TenantSpec
from clusters.tests.conftest import make_tenant, quota
from tests.judges.quota import judge
from tests.judges.world import World

L40S = (("nvidia.com/gpu.product", "NVIDIA-L40S"),)
OFFERED = (
    "nvidia.com/gpu",
    "nvidia.com/gpu.shared",
    "nvidia.com/gpucores",
    "nvidia.com/gpumem",
    "nvidia.com/mig-1g.18gb",
    "nvidia.com/mig-3g.71gb",
)


def world(*tenants: TenantSpec, running: tuple[dict[str, Any], ...] = (), **profile: Any) -> World:
    cluster = ClusterProfile(**{"gpu_resources": OFFERED, **profile})
    rendered = render_shared(tenants, cluster) + [o for t in tenants for o in render_tenant(t, cluster)]
    return World(cluster, tenants, tuple(rendered), running=running)


def pod(limits=None, name: str = "p", namespace: str = "tenant-acme", phase: str = "", claims=()):
    limits = limits or {}
    spec: dict[str, Any] = {
        "containers": [{"name": "main", "resources": {"limits": {k: str(v) for k, v in limits.items()}}}]
    }
    if claims:
        spec["resourceClaims"] = [
            {"name": f"c{i}", "resourceClaimTemplateName": t} for i, t in enumerate(claims)
        ]
    manifest = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }
    if phase:
        manifest["status"] = {"phase": phase}
    return manifest


def gpus(n: int) -> dict[str, int]:
    return {"nvidia.com/gpu": n}


@pytest.mark.parametrize("scheduler", ["kueue", "kai"])
def test_a_mig_profile_the_tenant_holds_none_of_is_refused_with_0(scheduler):
    found = judge(pod({"nvidia.com/mig-3g.71gb": 1}), world(make_tenant(), scheduler=scheduler))
    assert found == [
        "exceeded quota: gpucloud-gpu-quota, requested: requests.nvidia.com/mig-3g.71gb=1, "
        "used: requests.nvidia.com/mig-3g.71gb=0, limited: requests.nvidia.com/mig-3g.71gb=0"
    ]


@pytest.mark.parametrize("resource", ["nvidia.com/gpumem", "nvidia.com/gpucores", "nvidia.com/gpu.shared"])
def test_hami_and_shared_resources_the_tenant_holds_none_of_are_refused(resource):
    (message,) = judge(pod({resource: 1024}), world(make_tenant()))
    assert f"limited: requests.{resource}=0" in message


def test_a_pod_within_the_quota_is_admitted():
    assert judge(pod(gpus(6) | {"nvidia.com/mig-1g.18gb": 7}), world(make_tenant())) == []


def test_running_pods_count_and_finished_ones_do_not():
    running = (pod(gpus(4), "a"), pod(gpus(2), "b"), pod(gpus(8), "done", phase="Succeeded"))
    (message,) = judge(pod(gpus(1)), world(make_tenant(), running=running))
    assert "requested: requests.nvidia.com/gpu=1, used: requests.nvidia.com/gpu=6" in message
    assert judge(pod(gpus(1)), world(make_tenant(), running=running[1:])) == []


def test_other_namespaces_use_their_own_quota():
    other = make_tenant("other", quotas=())
    running = (pod(gpus(6), "a"),)  # acme's
    (message,) = judge(pod(gpus(1), namespace="tenant-other"), world(make_tenant(), other, running=running))
    assert "used: requests.nvidia.com/gpu=0, limited: requests.nvidia.com/gpu=0" in message


def test_requests_count_like_the_api_server_init_containers_and_sidecars_included():
    manifest = pod(gpus(2))
    manifest["spec"]["initContainers"] = [
        {"name": "warmup", "resources": {"limits": gpus(6)}},  # alone: 6 at most at a time
        {"name": "sidecar", "restartPolicy": "Always", "resources": {"requests": gpus(1), "limits": gpus(1)}},
    ]
    assert judge(manifest, world(make_tenant())) == []  # max(2 + 1, 6) = 6
    manifest["spec"]["initContainers"][0]["resources"]["limits"] = gpus(7)
    assert "requested: requests.nvidia.com/gpu=7" in judge(manifest, world(make_tenant()))[0]


def two_models() -> TenantSpec:
    return make_tenant(quotas=(quota(), quota("l40s-48gb", guaranteed=1, burst=0, node_labels=L40S)))


def test_on_kueue_the_quota_is_the_sum_of_the_models_and_kueue_flavors_hold_each_model():
    # 6 H200s + 1 L40S: 7 nvidia.com/gpu pass the ResourceQuota (the backstop); Kueue's per-model flavors
    # (clusters/render/kueue.py) are what keeps the 7th off an H200.
    assert judge(pod(gpus(7)), world(two_models(), scheduler="kueue")) == []
    assert judge(pod(gpus(8)), world(two_models(), scheduler="kueue")) != []


def test_on_kai_without_dra_only_the_sum_holds():
    assert judge(pod(gpus(7)), world(two_models(), scheduler="kai")) == []


def test_on_kai_with_dra_each_model_is_held_by_its_device_class():
    found = world(two_models(), scheduler="kai", dra=True)
    assert "limited: requests.nvidia.com/gpu=0" in judge(pod(gpus(1)), found)[0]
    assert judge(pod(claims=["h200-141gb"] * 6 + ["l40s-48gb"]), found) == []
    (message,) = judge(pod(claims=["l40s-48gb"] * 2), found)
    assert "requested: gpucloud-l40s-48gb.deviceclass.resource.k8s.io/devices=2" in message
    assert "limited: gpucloud-l40s-48gb.deviceclass.resource.k8s.io/devices=1" in message
