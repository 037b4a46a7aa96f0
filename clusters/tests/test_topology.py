"""Topology-aware admission on a host cluster (clusters/render/topology.py): the driver creates, updates and
deletes the Topology with the shared objects; discovery sees the NVLink domains and KAI's Topology CRD; the
conformance report says whether the scheduler places by topology, and how to turn it on."""

from __future__ import annotations

from dataclasses import replace

from clusters.drivers import conformance
from clusters.drivers.discovery import discover
from clusters.drivers.kubernetes import KubernetesDriver
from clusters.profiles import profile_of
from clusters.render import ClusterProfile, topology
from clusters.tests.conftest import make_tenant
from clusters.tests.test_discovery import gpu_node
from fleet.models import HostCluster
from gpucloud.kube.api import KubeApi
from tests.kube_emulator import _r

KUEUE = "kueue.x-k8s.io/v1beta2"
KAI = "kai.scheduler/v1alpha1"
MAP = "admissionregistration.k8s.io/v1beta1"
BLOCK, RACK = "example.com/topology-block", "example.com/topology-rack"


def serve_mutating_policies(kube_emulator) -> None:
    kube_emulator.register_resources(
        (
            _r(MAP, "mutatingadmissionpolicies", "MutatingAdmissionPolicy", False),
            _r(MAP, "mutatingadmissionpolicybindings", "MutatingAdmissionPolicyBinding", False),
        )
    )


def levels_of(kube_emulator, api: str) -> dict[str, list[str]]:
    return {
        o["metadata"]["name"]: [level["nodeLabel"] for level in o["spec"]["levels"]]
        for o in kube_emulator.objects_of(api, "Topology")
    }


def test_kueue_topology_flavors_and_default_are_applied_updated_and_removed(kube_emulator, kube_client):
    serve_mutating_policies(kube_emulator)
    profile = ClusterProfile(topology_levels=(BLOCK, RACK), mutating_admission="v1beta1")
    tenants = [make_tenant()]

    result = KubernetesDriver(kube_client, profile).reconcile(tenants, complete=True)

    assert result.errors == {}
    assert levels_of(kube_emulator, KUEUE) == {"gpucloud": [BLOCK, RACK, "kubernetes.io/hostname"]}
    flavors = kube_emulator.objects_of(KUEUE, "ResourceFlavor")
    assert flavors
    assert {f["spec"]["topologyName"] for f in flavors} == {"gpucloud"}
    policy = kube_emulator.get_object(MAP, "MutatingAdmissionPolicy", topology.DEFAULTS)
    assert RACK in policy["spec"]["mutations"][0]["applyConfiguration"]["expression"]
    assert KubernetesDriver(kube_client, profile).reconcile(tenants, complete=True).writes == 0

    # NVLink domains appear: the same Topology gains the clique level (Kueue allows it, hostname stays last).
    cliques = replace(profile, nvlink_domains=True)
    assert KubernetesDriver(kube_client, cliques).reconcile(tenants, complete=True).errors == {}
    assert levels_of(kube_emulator, KUEUE)["gpucloud"] == [
        BLOCK,
        RACK,
        topology.NVLINK_CLIQUE,
        topology.HOSTNAME,
    ]

    # The levels are unregistered: the Topology and the default go, the flavors name no topology.
    bare = replace(profile, topology_levels=())
    assert KubernetesDriver(kube_client, bare).reconcile(tenants, complete=True).errors == {}
    assert levels_of(kube_emulator, KUEUE) == {}
    assert all("topologyName" not in f["spec"] for f in kube_emulator.objects_of(KUEUE, "ResourceFlavor"))
    assert kube_emulator.get_object(MAP, "MutatingAdmissionPolicy", topology.DEFAULTS) is None


def test_kai_gets_a_new_topology_when_the_levels_change_and_the_old_one_is_pruned(kube_emulator, kube_client):
    serve_mutating_policies(kube_emulator)
    rack = ClusterProfile(
        scheduler="kai", topology_levels=(RACK,), kai_topology=True, mutating_admission="v1beta1"
    )
    tenants = [make_tenant()]

    assert KubernetesDriver(kube_client, rack).reconcile(tenants, complete=True).errors == {}
    first = topology.kai_topology_name(rack)
    assert levels_of(kube_emulator, KAI) == {first: [RACK, topology.HOSTNAME]}
    policy = kube_emulator.get_object(MAP, "MutatingAdmissionPolicy", topology.DEFAULTS)
    assert first in policy["spec"]["mutations"][0]["applyConfiguration"]["expression"]
    assert kube_emulator.get_object(MAP, "MutatingAdmissionPolicy", "gpucloud-kai-pod-defaults")

    wider = replace(rack, topology_levels=(BLOCK, RACK))
    assert KubernetesDriver(kube_client, wider).reconcile(tenants, complete=True).errors == {}
    assert levels_of(kube_emulator, KAI) == {
        topology.kai_topology_name(wider): [BLOCK, RACK, topology.HOSTNAME]
    }

    gone = KubernetesDriver(kube_client, wider).reconcile([], complete=True)
    assert gone.errors == {}
    assert levels_of(kube_emulator, KAI) == {}


def test_discovery_sees_nvlink_domains_and_kais_topology_crd(kube_emulator, kube_client):
    kube_emulator.put_object(gpu_node("gpu-1", **{"nvidia.com/gpu.product": "NVIDIA-GB200"}))
    assert discover(KubeApi(kube_client)).addons["nvlink_domains"] is False
    kube_emulator.put_object(
        gpu_node("gpu-2", **{"nvidia.com/gpu.product": "NVIDIA-GB200", "nvidia.com/gpu.clique": "abc.1"})
    )
    found = discover(KubeApi(kube_client))
    assert found.addons["nvlink_domains"] is True
    assert found.addons["kai_topology"] is True


def capability(found, scheduler):
    caps = conformance.check(found, mig_configmap="m", plugin_configmap="p", scheduler=scheduler)
    return next(c for c in caps if c.name == "topology_aware_scheduling")


def test_conformance_reports_kueue_tas_on_by_default_and_off_when_its_gate_is(kube_emulator, kube_client):
    kube_emulator.put_object(
        gpu_node("gpu-1", **{"nvidia.com/gpu.product": "NVIDIA-GB200", "nvidia.com/gpu.clique": "abc.1"})
    )
    found = discover(KubeApi(kube_client), conformance=True)
    on = capability(found, "kueue")
    assert on.found
    assert "1 of 1 GPU nodes carry nvidia.com/gpu.clique" in on.version

    off = capability(
        replace(found, kueue_config={"featureGates": {"TopologyAwareScheduling": False}}), "kueue"
    )
    assert not off.found
    assert "turned off" in off.version
    assert "TopologyAwareScheduling: false" in off.how
    assert capability(replace(found, kueue_config={"featureGates": {"Other": False}}), "kueue").found


def test_conformance_reports_kais_topology_crd(kube_emulator, kube_client):
    found = discover(KubeApi(kube_client), conformance=True)
    assert capability(found, "kai").found
    groups = {g: v for g, v in found.groups.items() if g != "kai.scheduler"}
    missing = capability(replace(found, groups=groups), "kai")
    assert not missing.found
    assert "no KAI Topology is rendered" in missing.without
    assert "v0.12" in missing.how


def test_the_profile_takes_levels_cliques_and_kais_crd_from_the_row_and_discovery(db):
    cluster = HostCluster.objects.create(
        name="gpu-west",
        driver=HostCluster.Driver.KUBERNETES,
        scheduler="kai",
        topology_levels=[BLOCK, RACK],
        addons={"nvlink_domains": True, "kai_topology": True},
    )
    profile = profile_of(cluster)
    assert topology.levels(profile) == [BLOCK, RACK, topology.NVLINK_CLIQUE, topology.HOSTNAME]
    assert topology.renders_kai_topology(profile)
    cluster.addons = {}
    assert topology.levels(profile_of(cluster)) == [BLOCK, RACK, topology.HOSTNAME]
    assert not topology.renders_kai_topology(profile_of(cluster))
