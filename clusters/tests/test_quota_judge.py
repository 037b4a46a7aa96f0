"""The quota judge (tests/judges/quota.py): ResourceQuota arithmetic against what gpucloud rendered.

A pod asking for any GPU resource the cluster offers and its tenant holds none of is refused with 0; the
per-model limits hold as each scheduler allows (clusters/render/resourcequota.py).
"""

from __future__ import annotations

from copy import deepcopy
from typing import Any

import pytest

from clusters.render import ClusterProfile, dra, render_shared, render_tenant
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
    if cluster.dra:
        rendered += [o for t in tenants for o in synced_templates(t)]
    return World(cluster, tenants, tuple(rendered), running=running)


def synced(name: str, tenant: TenantSpec, namespace: str = dra.IN_VCLUSTER_NAMESPACE) -> str:
    """vCluster's host name for an object of the tenant's vCluster (`<name>-x-<namespace>-x-<vcluster>`)."""
    return f"{name}-x-{namespace}-x-{tenant.slug}"


def synced_templates(tenant: TenantSpec) -> list[dict[str, Any]]:
    """The host copies vCluster makes of the claim templates gpucloud applies inside the tenant's vCluster."""
    copies = []
    for template in dra.render_claim_templates(tenant):
        copy = deepcopy(template)
        copy["metadata"] |= {"name": synced(copy["metadata"]["name"], tenant), "namespace": tenant.namespace}
        copies.append(copy)
    return copies


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
    tenant = two_models()
    found = world(tenant, scheduler="kai", dra=True)
    h200, l40s = synced("h200-141gb", tenant), synced("l40s-48gb", tenant)
    assert "limited: requests.nvidia.com/gpu=0" in judge(pod(gpus(1)), found)[0]
    assert judge(pod(claims=[h200] * 6 + [l40s]), found) == []
    (message,) = judge(pod(claims=[l40s] * 2), found)
    assert "requested: gpucloud-l40s-48gb.deviceclass.resource.k8s.io/devices=2" in message
    assert "limited: gpucloud-l40s-48gb.deviceclass.resource.k8s.io/devices=1" in message


def tenant_template(tenant: TenantSpec, name: str, device_class: str, count: int = 1) -> dict[str, Any]:
    """A claim template the tenant wrote inside its vCluster, as vCluster syncs it to the host."""
    template = dra.claim_template("h200-141gb", synced(name, tenant), tenant.namespace)
    template["spec"]["spec"]["devices"]["requests"][0]["exactly"] |= {
        "deviceClassName": device_class,
        "count": count,
    }
    return template


def test_a_claim_from_inside_the_vcluster_for_a_class_the_tenant_holds_none_of_is_refused():
    """Every DeviceClass the cluster serves is in the quota (discovery lists them), 0 where not held: the
    driver's own classes and another tenant's model as much as gpucloud's."""
    h200_only = make_tenant(quotas=(quota(),))
    other = make_tenant("bolt", namespace="tenant-bolt", quotas=(quota("l40s-48gb", node_labels=L40S),))
    classes = ("gpu.nvidia.com", "mig.nvidia.com", "gpucloud-h200-141gb", "gpucloud-l40s-48gb")
    offered = OFFERED + tuple(f"{name}{dra.DEVICE_COUNT}" for name in classes)
    base = world(h200_only, other, scheduler="kueue", dra=True, gpu_resources=offered)
    own = [
        tenant_template(h200_only, "l40s", "gpucloud-l40s-48gb"),
        tenant_template(h200_only, "any-gpu", "gpu.nvidia.com"),
        tenant_template(h200_only, "eight", "gpucloud-h200-141gb", count=8),
    ]
    found = World(base.profile, base.tenants, base.rendered + tuple(own))
    # Its own class, inside its quota (4 + 2): admitted.
    assert judge(pod(claims=[synced("h200-141gb", h200_only)] * 6), found) == []
    for name, device_class in (("l40s", "gpucloud-l40s-48gb"), ("any-gpu", "gpu.nvidia.com")):
        (message,) = judge(pod(claims=[synced(name, h200_only)]), found)
        assert f"requested: {device_class}.deviceclass.resource.k8s.io/devices=1" in message
        assert f"limited: {device_class}.deviceclass.resource.k8s.io/devices=0" in message
    # Its own class beyond its quota, in one claim of its own: refused too.
    (message,) = judge(pod(claims=[synced("eight", h200_only)]), found)
    assert "limited: gpucloud-h200-141gb.deviceclass.resource.k8s.io/devices=6" in message
