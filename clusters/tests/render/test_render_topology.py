"""Topology-aware admission (clusters/render/topology.py): the host cluster's Topology per scheduler, the
flavors naming it, and the "preferred: rack" default a MutatingAdmissionPolicy gives synced pods."""

from __future__ import annotations

from typing import Any

import pytest

from clusters.render import ClusterProfile, render_shared, render_tenant, topology
from clusters.render.kinds import kinds_for
from clusters.spec import TenantSpec
from clusters.tests.render.conftest import MIG, quota
from clusters.tests.render.crd_schemas import problems
from gpucloud.kube.kinds import KAI_QUEUE, KAI_TOPOLOGY, KUEUE_TOPOLOGY, RESOURCE_FLAVOR
from tests.judges import admission
from tests.judges.world import world_of

BLOCK, RACK = "example.com/topology-block", "example.com/topology-rack"
CLIQUE, HOST = "nvidia.com/gpu.clique", "kubernetes.io/hostname"

# (registered levels, NVLink cliques seen) → the levels rendered, outermost first.
CASES = {
    "none": ((), False, []),
    "rack": ((RACK,), False, [RACK, HOST]),
    "block+rack": ((BLOCK, RACK), False, [BLOCK, RACK, HOST]),
    "clique": ((BLOCK, RACK), True, [BLOCK, RACK, CLIQUE, HOST]),
}


def tenant(**kwargs: Any) -> TenantSpec:
    values: dict[str, Any] = {
        "slug": "acme",
        "public_id": "ten_acme",
        "trust_tier": "standard",
        "desired": "running",
        "namespace": "tenant-acme",
        "quotas": (quota(), MIG),
    }
    values.update(kwargs)
    return TenantSpec(**values)


def profile(case: str, **kwargs: Any) -> ClusterProfile:
    registered, cliques, _ = CASES[case]
    return ClusterProfile(topology_levels=registered, nvlink_domains=cliques, **kwargs)


def rendered(p: ClusterProfile) -> list[dict[str, Any]]:
    return render_shared([tenant()], p) + render_tenant(tenant(), p)


def of_kind(objects: list[dict[str, Any]], kind: str, api: str = "") -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind and o["apiVersion"].startswith(api)]


@pytest.mark.parametrize("case", CASES)
def test_kueue_gets_one_topology_of_the_fleets_levels_and_every_flavor_names_it(case):
    objects = rendered(profile(case))
    expected = CASES[case][2]
    topologies = of_kind(objects, "Topology")
    flavors = of_kind(objects, "ResourceFlavor")
    assert len(flavors) == 2
    if not expected:
        assert topologies == []
        assert all("topologyName" not in f["spec"] for f in flavors)
        return
    (found,) = topologies
    assert found["apiVersion"] == "kueue.x-k8s.io/v1beta2"
    assert [level["nodeLabel"] for level in found["spec"]["levels"]] == expected
    assert {f["spec"]["topologyName"] for f in flavors} == {found["metadata"]["name"]}
    kinds = kinds_for(profile(case))
    assert kinds.index(KUEUE_TOPOLOGY) < kinds.index(RESOURCE_FLAVOR)
    for manifest in [found, *flavors]:
        assert problems(manifest) == [], manifest["metadata"]["name"]


def test_a_hostname_or_clique_registered_as_a_level_is_placed_where_the_schedulers_need_it():
    p = ClusterProfile(topology_levels=(HOST, CLIQUE, BLOCK, RACK), nvlink_domains=True)
    assert topology.levels(p) == [BLOCK, RACK, CLIQUE, HOST]
    assert topology.levels(ClusterProfile(topology_levels=(HOST,))) == []


@pytest.mark.parametrize(
    ("registered", "level"),
    [((BLOCK, RACK), RACK), ((RACK, BLOCK), RACK), ((BLOCK,), BLOCK), (("zone", "b/rack"), "b/rack")],
)
def test_gangs_prefer_the_rack_else_the_innermost_registered_level(registered, level):
    assert topology.default_level(ClusterProfile(topology_levels=registered, nvlink_domains=True)) == level


@pytest.mark.parametrize("case", CASES)
def test_kai_gets_its_own_topology_with_the_same_levels_where_it_serves_the_crd(case):
    p = profile(case, scheduler="kai", kai_topology=True)
    topologies = of_kind(rendered(p), "Topology")
    expected = CASES[case][2]
    if not expected:
        assert topologies == []
        return
    (found,) = topologies
    assert found["apiVersion"] == "kai.scheduler/v1alpha1"
    assert [level["nodeLabel"] for level in found["spec"]["levels"]] == expected
    assert problems(found) == []
    assert kinds_for(p).index(KAI_TOPOLOGY) < kinds_for(p).index(KAI_QUEUE)
    assert of_kind(rendered(profile(case, scheduler="kai")), "Topology") == []  # CRD not served


def test_a_topology_kind_is_listed_wherever_served_so_that_one_no_longer_rendered_is_pruned():
    assert KUEUE_TOPOLOGY in kinds_for(profile("none"))
    assert KAI_TOPOLOGY in kinds_for(profile("none", scheduler="kai", kai_topology=True))
    assert KAI_TOPOLOGY not in kinds_for(profile("rack", scheduler="kai"))  # not served: never listed


def test_other_levels_make_another_kai_topology_because_kai_refuses_to_change_them():
    rack = topology.kai_topology_name(profile("rack", scheduler="kai", kai_topology=True))
    clique = topology.kai_topology_name(profile("clique", scheduler="kai", kai_topology=True))
    block = topology.kai_topology_name(profile("block+rack", scheduler="kai", kai_topology=True))
    assert len({rack, clique, block}) == 3
    assert rack == topology.kai_topology_name(profile("rack", scheduler="kai", kai_topology=True))


def test_nothing_topological_is_rendered_without_tenants():
    assert of_kind(render_shared([], profile("clique", scheduler="kai", kai_topology=True)), "Topology") == []
    assert of_kind(render_shared([], profile("clique")), "Topology") == []


# --- the default: "preferred: rack" ----------------------------------------------------------------------


def defaults(p: ClusterProfile) -> list[dict[str, Any]]:
    return [o for o in rendered(p) if o["metadata"]["name"] == topology.DEFAULTS]


def pod(annotations: dict[str, str] | None = None, synced: bool = True) -> dict[str, Any]:
    labels = {"kueue.x-k8s.io/queue-name": "default"}
    if synced:
        labels[topology.SYNCED_LABEL] = "acme"
    metadata: dict[str, Any] = {"name": "train-0-x-acme", "namespace": "tenant-acme", "labels": labels}
    if annotations is not None:
        metadata["annotations"] = annotations
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {"containers": [{"name": "torch", "image": "pytorch"}]},
    }


def applies_to(policy: dict[str, Any], manifest: dict[str, Any]) -> bool:
    """The policy's matchConditions, evaluated with the CEL runtime of the admission judge."""
    return all(
        admission.evaluate(c["expression"], {"object": manifest}) for c in policy["spec"]["matchConditions"]
    )


PROFILES = {
    "kueue": profile("block+rack", mutating_admission="v1beta1"),
    "kai": profile("block+rack", scheduler="kai", kai_topology=True, mutating_admission="v1beta1"),
}


@pytest.mark.parametrize("scheduler", PROFILES)
def test_a_synced_pod_asking_for_no_topology_gets_preferred_rack(scheduler):
    p = PROFILES[scheduler]
    policy, binding = defaults(p)
    assert (policy["kind"], binding["kind"]) == ("MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding")
    assert policy["apiVersion"] == "admissionregistration.k8s.io/v1beta1"
    assert policy["spec"]["failurePolicy"] == "Ignore"
    assert applies_to(policy, pod())
    assert applies_to(policy, pod({"team": "vision"}))
    expression = policy["spec"]["mutations"][0]["applyConfiguration"]["expression"]
    annotations = topology.annotations_expression(p)
    assert expression == f"Object{{metadata: Object.metadata{{annotations: {annotations}}}}}"
    added = admission.evaluate(annotations, {"object": pod()})
    if scheduler == "kueue":
        assert added == {"kueue.x-k8s.io/podset-preferred-topology": RACK}
    else:
        assert added == {
            "kai.scheduler/topology": topology.kai_topology_name(p),
            "kai.scheduler/topology-preferred-placement": RACK,
        }
    assert binding["spec"]["policyName"] == policy["metadata"]["name"]
    assert topology.DEFAULTS in {o["metadata"]["name"] for o in rendered(p)}
    assert {k.kind for k in kinds_for(p)} >= {"MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"}


@pytest.mark.parametrize(
    ("scheduler", "own"),
    [
        ("kueue", {"kueue.x-k8s.io/podset-required-topology": BLOCK}),
        ("kueue", {"kueue.x-k8s.io/podset-unconstrained-topology": "true"}),
        ("kai", {"kai.scheduler/topology": "theirs", "kai.scheduler/topology-required-placement": BLOCK}),
    ],
)
def test_a_pod_asking_for_its_own_topology_is_left_alone_and_still_admitted(scheduler, own):
    p = PROFILES[scheduler]
    policy, _ = defaults(p)
    assert not applies_to(policy, pod(own))
    assert not applies_to(policy, pod(synced=False))
    # The tier's ValidatingAdmissionPolicy reads no annotation: "required: block" passes it.
    asked = pod(own)
    if scheduler == "kai":
        asked["metadata"]["labels"] = {topology.SYNCED_LABEL: "acme", "kai.scheduler/queue": "tenant-acme"}
        asked["spec"]["schedulerName"] = "kai-scheduler"
    assert admission.judge(asked, world_of(p, [tenant()])) == []


@pytest.mark.parametrize(
    "placement", ["kai.scheduler/topology-required-placement", "kai.scheduler/topology-preferred-placement"]
)
def test_a_kai_pod_asking_for_a_placement_only_gets_the_topology_named_and_no_preference(placement):
    p = PROFILES["kai"]
    policy, _ = defaults(p)
    asked = pod({placement: BLOCK})
    assert applies_to(policy, asked)
    added = admission.evaluate(topology.annotations_expression(p), {"object": asked})
    assert added == {"kai.scheduler/topology": topology.kai_topology_name(p)}


def test_no_default_without_a_mutating_policy_version_or_a_topology():
    assert defaults(profile("block+rack")) == []
    assert defaults(profile("none", mutating_admission="v1")) == []
    assert defaults(profile("block+rack", scheduler="kai", mutating_admission="v1")) == []  # no KAI Topology
    assert not any(k.kind == "MutatingAdmissionPolicy" for k in kinds_for(profile("block+rack")))


def test_the_pod_group_kais_grouper_builds_from_the_default_passes_the_upstream_crd():
    """KAI's pod-grouper copies the three annotations into `spec.topologyConstraint` (defaultgrouper,
    NVIDIA/KAI-Scheduler): the values gpucloud writes must be ones the PodGroup CRD accepts."""
    p = PROFILES["kai"]
    added = admission.evaluate(topology.annotations_expression(p), {"object": pod()})
    group = {
        "apiVersion": "scheduling.run.ai/v2alpha2",
        "kind": "PodGroup",
        "metadata": {"name": "pg-train-0", "namespace": "tenant-acme"},
        "spec": {
            "minMember": 1,
            "queue": "tenant-acme",
            "topologyConstraint": {
                "topology": added["kai.scheduler/topology"],
                "preferredTopologyLevel": added["kai.scheduler/topology-preferred-placement"],
            },
        },
    }
    assert problems(group) == []
    levels = next(o for o in rendered(p) if o["kind"] == "Topology")["spec"]["levels"]
    assert group["spec"]["topologyConstraint"]["preferredTopologyLevel"] in [lv["nodeLabel"] for lv in levels]


def test_the_crd_check_refuses_a_topology_kueue_would_refuse():
    bad = render_shared([tenant()], profile("rack"))
    (found,) = of_kind(bad, "Topology")
    found["spec"]["levels"] = [{"nodeLabel": HOST}, {"nodeLabel": RACK}]
    assert any("lowest level" in problem for problem in problems(found))
