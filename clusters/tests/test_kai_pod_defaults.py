"""On a KAI host cluster that serves MutatingAdmissionPolicies, gpucloud gives every synced tenant pod its
queue and KAI's scheduler name (clusters/render/kai.py `render_pod_defaults`); the conformance report says
whether it can."""

from __future__ import annotations

from clusters.drivers import conformance
from clusters.drivers.discovery import discover
from clusters.drivers.kubernetes import KubernetesDriver
from clusters.render import ClusterProfile
from clusters.tests.conftest import make_tenant
from gpucloud.kube.api import KubeApi
from tests.kube_emulator import _r

MAP = "admissionregistration.k8s.io/v1beta1"


def capability(found, name):
    caps = conformance.check(found, mig_configmap="m", plugin_configmap="p", scheduler="kai")
    return next(c for c in caps if c.name == name)


def test_a_cluster_serving_them_is_discovered_and_gets_the_policy_and_its_binding(kube_emulator, kube_client):
    kube_emulator.register_resources(
        (
            _r(MAP, "mutatingadmissionpolicies", "MutatingAdmissionPolicy", False),
            _r(MAP, "mutatingadmissionpolicybindings", "MutatingAdmissionPolicyBinding", False),
        )
    )
    found = discover(KubeApi(kube_client))
    assert found.mutating_policies == ("v1beta1",)
    assert found.addons["mutating_admission_policy_v1beta1"]
    assert capability(found, "kai_pod_defaults").found

    driver = KubernetesDriver(kube_client, ClusterProfile(scheduler="kai", mutating_admission="v1beta1"))
    result = driver.reconcile([make_tenant()], complete=True)

    assert result.errors == {}
    policy = kube_emulator.get_object(MAP, "MutatingAdmissionPolicy", "gpucloud-kai-pod-defaults")
    assert "params.data.queue" in policy["spec"]["mutations"][0]["applyConfiguration"]["expression"]
    binding = kube_emulator.get_object(MAP, "MutatingAdmissionPolicyBinding", "gpucloud-kai-pod-defaults")
    assert binding["spec"]["paramRef"]["name"] == "gpucloud-admission"
    assert driver.reconcile([make_tenant()], complete=True).writes == 0


def test_a_cluster_without_them_is_reported_with_what_enables_them(kube_emulator, kube_client):
    cap = capability(discover(KubeApi(kube_client)), "kai_pod_defaults")
    assert not cap.found
    assert "refuse a pod that lacks them" in cap.without
    assert "MutatingAdmissionPolicy=true" in cap.how
