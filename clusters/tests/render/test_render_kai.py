from clusters.render import ClusterProfile, render_shared, render_tenant
from clusters.render.kai import render_leaf_queue, render_parent_queue
from clusters.tests.render.conftest import quota


def test_the_leaf_queue_guarantees_gpus_under_its_tier(make_tenant):
    queue = render_leaf_queue(make_tenant())  # 4+2 whole H200s and 7 MIG 1g slices (1 GPU each to KAI)
    assert queue["apiVersion"] == "scheduling.run.ai/v2"
    assert queue["kind"] == "Queue"
    assert queue["spec"]["parentQueue"] == "gpucloud-standard"
    assert queue["spec"]["resources"]["gpu"] == {"quota": 11, "overQuotaWeight": 3, "limit": 13}
    assert queue["spec"]["resources"]["cpu"] == {"quota": -1, "overQuotaWeight": 1, "limit": -1}


def test_a_suspended_leaf_gets_nothing_new(make_tenant):
    queue = render_leaf_queue(make_tenant(desired="suspended"))
    assert queue["spec"]["resources"]["gpu"] == {"quota": 0, "overQuotaWeight": 0, "limit": 0}


def test_parents_per_tier_and_no_kueue_objects_on_kai(make_tenant):
    profile = ClusterProfile(scheduler="kai")
    shared = render_shared([make_tenant("a"), make_tenant("b", trust_tier="trusted")], profile)
    queues = [q["metadata"]["name"] for q in shared if q["kind"] == "Queue"]
    assert queues == ["gpucloud-standard", "gpucloud-trusted"]
    assert render_parent_queue("standard")["spec"]["resources"]["gpu"]["limit"] == -1
    kinds = [o["kind"] for o in render_tenant(make_tenant(), profile)]
    assert "Queue" in kinds
    assert "ClusterQueue" not in kinds
    assert "LocalQueue" not in kinds


def test_an_absent_tenant_renders_nothing(make_tenant):
    assert render_tenant(make_tenant(desired="absent"), ClusterProfile()) == []


def test_the_queue_charges_mig_slices_by_their_compute_slices_and_leaves_hami_and_shared_out(make_tenant):
    tenant = make_tenant(
        quotas=(
            quota(guaranteed=2, burst=1),
            quota("h200-141gb.mig-3g.71gb", "nvidia.com/mig-3g.71gb", guaranteed=2, burst=1),
            quota("h200-141gb.hami-25", guaranteed=8, burst=0),  # HAMi vGPUs are nvidia.com/gpu too
            quota("h200-141gb.shared", "nvidia.com/gpu.shared", guaranteed=4, burst=0),
        )
    )
    gpu = render_leaf_queue(tenant)["spec"]["resources"]["gpu"]
    assert gpu["quota"] == 2 + 2 * 3
    assert gpu["limit"] == 3 + 3 * 3


def test_a_tenant_of_hami_vgpus_only_gets_no_kai_guarantee(make_tenant):
    tenant = make_tenant(quotas=(quota("h200-141gb.hami-50", guaranteed=4, burst=0),))
    assert render_leaf_queue(tenant)["spec"]["resources"]["gpu"] == {
        "quota": 0,
        "overQuotaWeight": 1,
        "limit": 0,
    }


def test_where_the_cluster_serves_mutating_admission_policies_tenant_pods_get_their_queue_and_scheduler(
    make_tenant,
):
    profile = ClusterProfile(scheduler="kai", mutating_admission="v1beta1")
    shared = render_shared([make_tenant()], profile)
    policy, binding = (o for o in shared if o["kind"].startswith("MutatingAdmissionPolicy"))
    assert policy["apiVersion"] == "admissionregistration.k8s.io/v1beta1"
    assert policy["spec"]["paramKind"] == {"apiVersion": "v1", "kind": "ConfigMap"}
    (mutation,) = policy["spec"]["mutations"]
    expression = mutation["applyConfiguration"]["expression"]
    assert "'kai.scheduler/queue': params.data.queue" in expression
    assert "schedulerName: params.data.schedulerName" in expression
    assert "vcluster.loft.sh/managed-by" in policy["spec"]["matchConditions"][0]["expression"]
    assert binding["spec"]["policyName"] == policy["metadata"]["name"]
    assert binding["spec"]["paramRef"] == {"name": "gpucloud-admission", "parameterNotFoundAction": "Deny"}
    selector = binding["spec"]["matchResources"]["namespaceSelector"]
    assert selector == {"matchExpressions": [{"key": "gpucloud.io/trust-tier", "operator": "Exists"}]}


def test_without_mutating_admission_policies_nothing_is_rendered_for_them(make_tenant):
    for profile in (
        ClusterProfile(scheduler="kai"),
        ClusterProfile(scheduler="kueue", mutating_admission="v1"),
    ):
        kinds = {o["kind"] for o in render_shared([make_tenant()], profile)}
        assert "MutatingAdmissionPolicy" not in kinds
