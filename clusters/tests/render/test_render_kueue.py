from clusters.render import ClusterProfile, render_shared
from clusters.render.kueue import (
    flavor_name,
    render_cluster_queue,
    render_local_queue,
    render_resource_flavor,
    render_topology,
)
from clusters.tests.render.conftest import MIG, quota
from gpucloud.kube.meta import SHARED, TENANT


def test_a_flavor_per_gpu_class_pins_its_nodes(make_tenant):
    flavor = render_resource_flavor(MIG, ClusterProfile())
    assert flavor["apiVersion"] == "kueue.x-k8s.io/v1beta2"
    assert flavor["kind"] == "ResourceFlavor"
    assert flavor["metadata"]["name"] == "h200-141gb.mig-1g.18gb"
    assert flavor["metadata"]["labels"][TENANT] == SHARED
    assert flavor["spec"]["nodeLabels"] == {"nvidia.com/gpu.product": "NVIDIA-H200"}
    assert "topologyName" not in flavor["spec"]
    assert flavor_name("H100 80GB/MIG") == "h100-80gb-mig"


def test_the_cluster_queue_maps_guaranteed_burst_and_lendable(make_tenant):
    cq = render_cluster_queue(make_tenant(trust_tier="trusted"))
    spec = cq["spec"]
    assert cq["metadata"]["name"] == "tenant-acme"
    assert "namespace" not in cq["metadata"]
    assert spec["cohortName"] == "gpucloud-trusted"
    assert spec["stopPolicy"] == "None"
    assert spec["fairSharing"] == {"weight": "3"}
    assert spec["preemption"]["reclaimWithinCohort"] == "Any"
    assert spec["resourceGroups"] == [
        {
            "coveredResources": ["nvidia.com/gpu"],
            "flavors": [
                {
                    "name": "h200-141gb",
                    "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "4", "borrowingLimit": "2"}],
                }
            ],
        },
        {
            "coveredResources": ["nvidia.com/mig-1g.18gb"],
            "flavors": [
                {
                    "name": "h200-141gb.mig-1g.18gb",
                    "resources": [
                        {
                            "name": "nvidia.com/mig-1g.18gb",
                            "nominalQuota": "7",
                            "borrowingLimit": "0",
                            "lendingLimit": "3",
                        }
                    ],
                }
            ],
        },
    ]


def test_lending_never_exceeds_the_guarantee(make_tenant):
    tenant = make_tenant(quotas=(quota(guaranteed=2, lendable=5),))
    (group,) = render_cluster_queue(tenant)["spec"]["resourceGroups"]
    assert group["flavors"][0]["resources"][0]["lendingLimit"] == "2"


def test_classes_sharing_a_resource_are_flavors_of_one_group(make_tenant):
    tenant = make_tenant(quotas=(quota("h200-141gb"), quota("h100-80gb")))
    (group,) = render_cluster_queue(tenant)["spec"]["resourceGroups"]
    assert [f["name"] for f in group["flavors"]] == ["h100-80gb", "h200-141gb"]


def test_a_suspended_tenant_is_held(make_tenant):
    tenant = make_tenant(desired="suspended")
    assert render_cluster_queue(tenant)["spec"]["stopPolicy"] == "Hold"
    assert render_local_queue(tenant)["spec"]["stopPolicy"] == "Hold"


def test_the_local_queue_is_default_in_the_host_namespace(make_tenant):
    lq = render_local_queue(make_tenant())
    assert lq["metadata"]["name"] == "default"
    assert lq["metadata"]["namespace"] == "tenant-acme"
    assert lq["spec"]["clusterQueue"] == "tenant-acme"


def test_shared_objects_cover_the_tenants_classes_and_tiers(make_tenant):
    tenants = [
        make_tenant("a"),
        make_tenant("b", trust_tier="isolated", quotas=(quota("b200"),)),
        make_tenant("gone", desired="absent", quotas=(quota("l40s"),)),
    ]
    shared = render_shared(tenants, ClusterProfile())
    names = {(o["kind"], o["metadata"]["name"]) for o in shared}
    assert ("ResourceFlavor", "b200") in names
    assert ("ResourceFlavor", "h200-141gb.mig-1g.18gb") in names
    assert ("ResourceFlavor", "l40s") not in names
    assert {n for kind, n in names if kind == "Cohort"} == {"gpucloud-standard", "gpucloud-isolated"}
    assert {n for kind, n in names if kind == "WorkloadPriorityClass"} >= {"gpucloud-inference"}
    assert all(o["metadata"]["labels"][TENANT] == SHARED for o in shared)
    priority = next(o for o in shared if o["kind"] == "WorkloadPriorityClass")
    assert isinstance(priority["value"], int)


def test_topology_levels_end_at_the_hostname_and_flavors_use_them():
    profile = ClusterProfile(topology_levels=("example.com/block", "example.com/rack"))
    topology = render_topology(profile)
    assert [level["nodeLabel"] for level in topology["spec"]["levels"]] == [
        "example.com/block",
        "example.com/rack",
        "kubernetes.io/hostname",
    ]
    assert render_resource_flavor(MIG, profile)["spec"]["topologyName"] == topology["metadata"]["name"]


def test_no_tenants_need_no_shared_objects():
    assert render_shared([], ClusterProfile()) == []
