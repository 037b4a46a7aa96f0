from clusters.render import ClusterProfile, render_shared, render_tenant
from clusters.render.kai import render_leaf_queue, render_parent_queue


def test_the_leaf_queue_guarantees_whole_gpus_under_its_tier(make_tenant):
    queue = render_leaf_queue(make_tenant())
    assert queue["apiVersion"] == "scheduling.run.ai/v2"
    assert queue["kind"] == "Queue"
    assert queue["spec"]["parentQueue"] == "gpucloud-standard"
    assert queue["spec"]["resources"]["gpu"] == {"quota": 4, "overQuotaWeight": 1, "limit": 6}
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
