from clusters.render.resourcequota import render_resource_quota
from clusters.tests.render.conftest import quota


def test_it_caps_each_gpu_resource_at_guaranteed_plus_burst(make_tenant):
    rq = render_resource_quota(make_tenant())
    assert rq["metadata"]["namespace"] == "tenant-acme"
    assert rq["spec"]["hard"] == {"requests.nvidia.com/gpu": "6", "requests.nvidia.com/mig-1g.18gb": "7"}


def test_classes_sharing_a_resource_name_add_up(make_tenant):
    tenant = make_tenant(quotas=(quota("h200-141gb"), quota("h100-80gb", guaranteed=1, burst=0)))
    assert render_resource_quota(tenant)["spec"]["hard"] == {"requests.nvidia.com/gpu": "7"}


def test_hami_resource_names_are_quota_keys_too(make_tenant):
    tenant = make_tenant(quotas=(quota("h200-141gb.shared", "nvidia.com/gpumem", guaranteed=40000, burst=0),))
    assert render_resource_quota(tenant)["spec"]["hard"] == {"requests.nvidia.com/gpumem": "40000"}
