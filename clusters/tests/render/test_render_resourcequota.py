from clusters.render import ClusterProfile
from clusters.render.kueue import render_cluster_queue
from clusters.render.resourcequota import PER_MODEL, render_resource_quota
from clusters.tests.render.conftest import quota

L40S = (("nvidia.com/gpu.product", "NVIDIA-L40S"),)
OFFERED = (
    "gpucloud-h200-141gb.deviceclass.resource.k8s.io/devices",
    "gpucloud-l40s-48gb.deviceclass.resource.k8s.io/devices",
    "gpu.nvidia.com.deviceclass.resource.k8s.io/devices",
    "nvidia.com/gpu",
    "nvidia.com/gpu.shared",
    "nvidia.com/gpucores",
    "nvidia.com/gpumem",
    "nvidia.com/mig-1g.18gb",
    "nvidia.com/mig-3g.71gb",
)


def two_models(make_tenant):
    return make_tenant(
        quotas=(quota("h200-141gb"), quota("l40s-48gb", guaranteed=1, burst=0, node_labels=L40S))
    )


def test_it_caps_each_gpu_resource_at_guaranteed_plus_burst(make_tenant):
    rq = render_resource_quota(make_tenant())
    assert rq["metadata"]["namespace"] == "tenant-acme"
    assert rq["spec"]["hard"] == {"requests.nvidia.com/gpu": "6", "requests.nvidia.com/mig-1g.18gb": "7"}


def test_every_gpu_resource_the_cluster_offers_is_named_with_0_for_those_not_held(make_tenant):
    hard = render_resource_quota(make_tenant(), ClusterProfile(gpu_resources=OFFERED))["spec"]["hard"]
    assert hard == {
        "gpucloud-h200-141gb.deviceclass.resource.k8s.io/devices": "0",
        "gpucloud-l40s-48gb.deviceclass.resource.k8s.io/devices": "0",
        "gpu.nvidia.com.deviceclass.resource.k8s.io/devices": "0",
        "requests.nvidia.com/gpu": "6",
        "requests.nvidia.com/gpu.shared": "0",
        "requests.nvidia.com/gpucores": "0",
        "requests.nvidia.com/gpumem": "0",
        "requests.nvidia.com/mig-1g.18gb": "7",
        "requests.nvidia.com/mig-3g.71gb": "0",
    }


def test_a_dra_cluster_counts_the_devices_of_the_classes_held_and_0_for_nvidias_own(make_tenant):
    profile = ClusterProfile(dra=True, gpu_resources=OFFERED)
    hard = render_resource_quota(make_tenant(), profile)["spec"]["hard"]
    assert hard["gpucloud-h200-141gb.deviceclass.resource.k8s.io/devices"] == "6"
    assert hard["gpucloud-h200-141gb.mig-1g.18gb.deviceclass.resource.k8s.io/devices"] == "7"
    assert hard["gpucloud-l40s-48gb.deviceclass.resource.k8s.io/devices"] == "0"
    assert hard["gpu.nvidia.com.deviceclass.resource.k8s.io/devices"] == "0"


def test_on_kueue_models_sharing_nvidia_gpu_hold_per_flavor_and_the_quota_is_their_sum(make_tenant):
    tenant = two_models(make_tenant)
    rq = render_resource_quota(tenant, ClusterProfile(scheduler="kueue"))
    assert rq["spec"]["hard"] == {"requests.nvidia.com/gpu": "7"}  # the backstop: 6 H200 + 1 L40S
    assert "Kueue flavors" in rq["metadata"]["annotations"][PER_MODEL]
    (group,) = render_cluster_queue(tenant)["spec"]["resourceGroups"]
    limits = {f["name"]: f["resources"][0] for f in group["flavors"]}
    assert limits["h200-141gb"] | {"name": "-"} == {"name": "-", "nominalQuota": "4", "borrowingLimit": "2"}
    assert limits["l40s-48gb"] | {"name": "-"} == {"name": "-", "nominalQuota": "1", "borrowingLimit": "0"}


def test_on_kai_with_dra_whole_gpus_of_two_models_are_claimed_per_model_class(make_tenant):
    tenant = two_models(make_tenant)
    rq = render_resource_quota(tenant, ClusterProfile(scheduler="kai", dra=True, gpu_resources=OFFERED))
    hard = rq["spec"]["hard"]
    assert hard["requests.nvidia.com/gpu"] == "0"  # no model could take the other's share through it
    assert hard["gpucloud-h200-141gb.deviceclass.resource.k8s.io/devices"] == "6"
    assert hard["gpucloud-l40s-48gb.deviceclass.resource.k8s.io/devices"] == "1"
    assert "DRA DeviceClasses" in rq["metadata"]["annotations"][PER_MODEL]


def test_on_kai_with_dra_hami_vgpus_keep_their_nvidia_gpu_quota(make_tenant):
    hami = quota("h200-141gb.hami-25", guaranteed=4, burst=0, per_unit=(("nvidia.com/gpumem", 36096),))
    tenant = make_tenant(quotas=(*two_models(make_tenant).quotas, hami))
    hard = render_resource_quota(tenant, ClusterProfile(scheduler="kai", dra=True))["spec"]["hard"]
    assert hard["requests.nvidia.com/gpu"] == "4"
    assert hard["requests.nvidia.com/gpumem"] == str(4 * 36096)


def test_on_kai_without_dra_only_the_sum_holds_and_the_quota_says_so(make_tenant):
    rq = render_resource_quota(two_models(make_tenant), ClusterProfile(scheduler="kai"))
    assert rq["spec"]["hard"] == {"requests.nvidia.com/gpu": "7"}
    assert rq["metadata"]["annotations"][PER_MODEL] == (
        "h200-141gb, l40s-48gb: only their sum holds "
        "(KAI has one GPU number per queue, and this cluster has no DRA)"
    )


def test_one_model_needs_no_per_model_statement(make_tenant):
    rq = render_resource_quota(make_tenant(), ClusterProfile(scheduler="kai"))
    assert PER_MODEL not in rq["metadata"]["annotations"]


def test_hami_resource_names_are_quota_keys_too(make_tenant):
    tenant = make_tenant(quotas=(quota("h200-141gb.shared", "nvidia.com/gpumem", guaranteed=40000, burst=0),))
    assert render_resource_quota(tenant)["spec"]["hard"] == {"requests.nvidia.com/gpumem": "40000"}
