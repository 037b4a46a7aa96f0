"""The scheduling judge (tests/judges/scheduling.py) on gpucloud's rendered vClusters and a host cluster's
nodes as the dedication and health passes leave them: an isolated tenant's pods land only on its own nodes,
nobody else's land there, and none lands on a quarantined node, unless a pod names its node (the kubelet
checks no NoSchedule taint) or carries a toleration it was not given, which other layers must refuse."""

from __future__ import annotations

from typing import Any

import pytest

from clusters.render import ClusterProfile
from clusters.spec import TenantSpec
from tests.judges import scheduling
from tests.judges.world import World, world_of

GPU = {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": "NVIDIA-H200"}


def node(name: str, owner: str = "", quarantined: str = "", **labels: str) -> dict[str, Any]:
    taints = []
    all_labels = {"kubernetes.io/hostname": name, **GPU, **labels}
    if owner:
        all_labels["gpucloud.io/tenant"] = owner
        taints.append({"key": "gpucloud.io/tenant", "value": owner, "effect": "NoSchedule"})
    spec: dict[str, Any] = {"taints": taints}
    if quarantined:
        taints.append({"key": "gpucloud.io/quarantine", "value": quarantined, "effect": "NoSchedule"})
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": all_labels},
        "spec": spec,
    }


def tenant(slug: str, tier: str, nodes: tuple[str, ...] = ()) -> TenantSpec:
    return TenantSpec(
        slug=slug,
        public_id=f"ten_{slug}",
        trust_tier=tier,  # type: ignore[arg-type]
        desired="running",
        namespace=f"tenant-{slug}",
        dedicated_nodes=nodes,
    )


@pytest.fixture(params=["kueue", "kai"])
def world(request: pytest.FixtureRequest) -> World:
    """Two isolated tenants with a node each, a standard tenant, two shared nodes and a quarantined one."""
    tenants = [tenant("solo", "isolated", ("n-solo",)), tenant("rival", "isolated", ("n-rival",))]
    tenants.append(tenant("acme", "standard"))
    nodes = [
        node("n-solo", "solo"),
        node("n-rival", "rival"),
        node("n-1"),
        node("n-2"),
        node("n-q", quarantined="xid-79"),
    ]
    return world_of(ClusterProfile(scheduler=request.param), tenants, nodes)


def pod(namespace: str, **spec: Any) -> dict[str, Any]:
    container = {"name": "main", "image": "cuda", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": namespace},
        "spec": {"containers": [container], **spec},
    }


def host(world: World, namespace: str, **spec: Any) -> dict[str, Any]:
    """The host pod vCluster makes of a tenant's pod (its enforced tolerations and node selector)."""
    return scheduling.synced(pod(namespace, **spec), world)


def test_an_isolated_tenants_pod_lands_only_on_its_own_node(world):
    synced = host(world, "tenant-solo")

    assert scheduling.judge(synced, world) == []
    assert scheduling.landing(synced, world) == ["n-solo"]
    assert scheduling.breaches(synced, world) == []


def test_a_shared_tenants_pod_lands_on_shared_nodes_only(world):
    synced = host(world, "tenant-acme")

    assert scheduling.landing(synced, world) == ["n-1", "n-2"]
    assert scheduling.breaches(synced, world) == []


def test_selecting_another_tenants_node_without_its_toleration_is_unschedulable(world):
    synced = host(world, "tenant-acme", nodeSelector={"gpucloud.io/tenant": "rival"})

    refusals = scheduling.judge(synced, world)

    assert (
        "unschedulable on node n-rival: untolerated taint {gpucloud.io/tenant: rival} (NoSchedule)"
        in refusals
    )
    assert any(
        r.startswith("unschedulable on node n-1: didn't match the pod's node selector") for r in refusals
    )
    assert len(refusals) == 5, "one message per node"


def test_an_isolated_tenant_cannot_reach_another_tenants_node_even_with_its_selector(world):
    # The syncer overwrites the tenant key of the node selector with the tenant's own value.
    synced = host(world, "tenant-solo", nodeSelector={"gpucloud.io/tenant": "rival"})
    assert synced["spec"]["nodeSelector"]["gpucloud.io/tenant"] == "solo"

    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "kubernetes.io/hostname", "operator": "In", "values": ["n-rival"]}
                        ]
                    }
                ]
            }
        }
    }
    refusals = scheduling.judge(host(world, "tenant-solo", affinity=affinity), world)

    assert refusals
    assert all(r.startswith("unschedulable on node") for r in refusals)
    assert any("n-rival: didn't match the pod's node selector gpucloud.io/tenant=solo" in r for r in refusals)


def test_a_toleration_for_another_tenants_taint_reaches_its_node_and_is_reported_as_a_breach(world):
    stolen = {"key": "gpucloud.io/tenant", "operator": "Equal", "value": "rival", "effect": "NoSchedule"}
    synced = host(world, "tenant-acme", tolerations=[stolen], nodeSelector={"gpucloud.io/tenant": "rival"})

    # The scheduler alone would place it: another layer (admission) must refuse it.
    assert scheduling.judge(synced, world) == []
    assert scheduling.breaches(synced, world) == [
        "pod may land on node n-rival: it is dedicated to tenant rival"
    ]


def test_a_wildcard_toleration_reaches_the_quarantined_node_only_past_its_cordon(world):
    everything = [{"operator": "Exists"}]
    synced = host(
        world, "tenant-acme", tolerations=everything, nodeSelector={"kubernetes.io/hostname": "n-q"}
    )

    assert scheduling.landing(synced, world) == ["n-q"], "Exists with no key tolerates the cordon's taint too"
    assert scheduling.breaches(synced, world) == [
        "pod may land on node n-q: it is quarantined (gpucloud.io/quarantine=xid-79)"
    ]
    no_cordon = [{"key": "gpucloud.io/quarantine", "operator": "Exists"}]
    cordoned = host(
        world, "tenant-acme", tolerations=no_cordon, nodeSelector={"kubernetes.io/hostname": "n-q"}
    )
    refusals = scheduling.judge(cordoned, world)
    assert any(r.startswith("unschedulable on node n-q: node(s) were unschedulable") for r in refusals)


def test_node_name_skips_the_schedulers_taint_checks(world):
    synced = host(world, "tenant-acme", nodeName="n-rival")

    assert "nodeSelector" not in synced["spec"] or "gpucloud.io/tenant" not in synced["spec"]["nodeSelector"]
    assert scheduling.judge(synced, world) == [], "the kubelet checks NoExecute taints only"
    assert scheduling.breaches(synced, world) == [
        "pod may land on node n-rival: it is dedicated to tenant rival (spec.nodeName skips the scheduler, "
        "so its NoSchedule taints were not checked)"
    ]


def test_the_kubelet_refuses_a_named_node_its_selector_does_not_match_or_a_noexecute_taint(world):
    mismatch = pod("tenant-acme", nodeName="n-1", nodeSelector={"nvidia.com/gpu.product": "NVIDIA-A100"})
    assert scheduling.judge(mismatch, world) == [
        "refused by the kubelet of node n-1: didn't match the pod's node selector "
        "nvidia.com/gpu.product=NVIDIA-A100"
    ]
    evicting = node("n-x")
    evicting["spec"]["taints"] = [{"key": "example.com/drain", "effect": "NoExecute"}]
    drained = World(world.profile, world.tenants, world.rendered, (*world.nodes, evicting))
    assert scheduling.judge(pod("tenant-acme", nodeName="n-x"), drained) == [
        "refused by the kubelet of node n-x: untolerated taint {example.com/drain} (NoExecute)"
    ]
    assert scheduling.judge(pod("tenant-acme", nodeName="nowhere"), world) == [
        "unschedulable: spec.nodeName nowhere names no node of the host cluster"
    ]


@pytest.mark.parametrize(
    ("toleration", "taint", "tolerated"),
    [
        (
            {"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule"},
            ("k", "v", "NoSchedule"),
            True,
        ),
        ({"key": "k", "value": "v"}, ("k", "v", "NoExecute"), True),  # Equal by default; no effect: every one
        ({"key": "k", "operator": "Equal", "value": "w"}, ("k", "v", "NoSchedule"), False),
        ({"key": "k", "operator": "Exists"}, ("k", "anything", "NoSchedule"), True),
        ({"operator": "Exists"}, ("any", "thing", "NoExecute"), True),
        ({"key": "k", "operator": "Exists", "effect": "NoExecute"}, ("k", "v", "NoSchedule"), False),
        ({"key": "other", "operator": "Exists"}, ("k", "v", "NoSchedule"), False),
        ({"key": "k", "operator": "Lt", "value": "5"}, ("k", "3", "NoSchedule"), False),  # alpha, off
    ],
)
def test_tolerations_match_taints_as_upstream(toleration, taint, tolerated):
    key, value, effect = taint
    assert scheduling.tolerates(toleration, {"key": key, "value": value, "effect": effect}) is tolerated


@pytest.mark.parametrize(
    ("expression", "matches"),
    [
        ({"key": "zone", "operator": "In", "values": ["a", "b"]}, True),
        ({"key": "zone", "operator": "NotIn", "values": ["a"]}, False),
        ({"key": "missing", "operator": "NotIn", "values": ["a"]}, True),
        ({"key": "zone", "operator": "Exists"}, True),
        ({"key": "missing", "operator": "DoesNotExist"}, True),
        ({"key": "gpus", "operator": "Gt", "values": ["4"]}, True),
        ({"key": "gpus", "operator": "Lt", "values": ["4"]}, False),
        ({"key": "zone", "operator": "Gt", "values": ["4"]}, False),  # not a number
    ],
)
def test_node_affinity_requirements_match_as_upstream(expression, matches):
    labelled = node("n", zone="a", gpus="8")
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [expression]}]
            }
        }
    }
    assert (scheduling.node_affinity_mismatch(pod("ns", affinity=affinity), labelled) is None) is matches


def test_an_empty_node_selector_term_matches_no_node_and_terms_are_ored():
    labelled = node("n", zone="a")
    empty: dict[str, Any] = {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{}]}}
    }
    assert scheduling.node_affinity_mismatch(pod("ns", affinity=empty), labelled) is not None
    either = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]},
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n"]}]},
                ]
            }
        }
    }
    assert scheduling.node_affinity_mismatch(pod("ns", affinity=either), labelled) is None


def test_prefer_no_schedule_taints_do_not_filter():
    soft = node("n")
    soft["spec"]["taints"] = [{"key": "example.com/spot", "effect": "PreferNoSchedule"}]
    assert scheduling.why_not(pod("ns"), soft) is None


def test_a_platform_mode_vcluster_enforces_the_same(world):
    profile = ClusterProfile(vcluster_mode="platform", platform_cluster="gpu-east")
    platform = world_of(profile, world.tenants, world.nodes)

    assert scheduling.landing(host(platform, "tenant-solo"), platform) == ["n-solo"]
