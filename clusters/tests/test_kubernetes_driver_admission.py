"""The Kubernetes driver keeps the admission policies, bindings and params (clusters/render/admission.py)."""

from __future__ import annotations

import dataclasses

from clusters.drivers.kubernetes import KubernetesDriver
from clusters.render import ClusterProfile, admission
from clusters.tests.conftest import make_tenant
from gpucloud.kube.api import api_client_for_url
from tests.kube_emulator import start_emulator

API = "admissionregistration.k8s.io/v1"
POLICY, BINDING = "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"


def test_the_policies_bindings_and_params_are_applied(kube_emulator, kube_client):
    driver = KubernetesDriver(kube_client, ClusterProfile(scheduler="kai"))
    result = driver.reconcile([make_tenant("a"), make_tenant("b", trust_tier="isolated")], complete=True)

    assert result.errors == {}
    names = {o["metadata"]["name"] for o in kube_emulator.objects_of(API, POLICY)}
    assert names == {"gpucloud-pods-standard", "gpucloud-pods-isolated"}
    binding = kube_emulator.get_object(API, BINDING, "gpucloud-pods-isolated")
    assert binding["spec"]["paramRef"] == {"name": "gpucloud-admission", "parameterNotFoundAction": "Deny"}
    params = kube_emulator.get_object("v1", "ConfigMap", "gpucloud-admission", "tenant-b")
    assert params["data"]["queue"] == "tenant-b"
    assert params["data"]["schedulerName"] == "kai-scheduler"


def test_a_policy_binding_or_params_deleted_by_hand_is_restored_in_the_next_pass(kube_emulator, kube_client):
    driver = KubernetesDriver(kube_client, ClusterProfile())
    tenants = [make_tenant()]
    driver.reconcile(tenants, complete=True)
    kube_emulator.remove_object(API, POLICY, "gpucloud-pods-standard")
    kube_emulator.remove_object(API, BINDING, "gpucloud-pods-standard")
    kube_emulator.remove_object("v1", "ConfigMap", "gpucloud-admission", "tenant-acme")

    result = driver.reconcile(tenants, complete=True)

    assert result.writes == 3
    assert result.drift_repaired == 1  # the tenant's params; shared objects missing are not counted as drift
    assert kube_emulator.get_object(API, POLICY, "gpucloud-pods-standard")["spec"]["failurePolicy"] == "Fail"
    assert kube_emulator.get_object(API, BINDING, "gpucloud-pods-standard")["spec"]["validationActions"] == [
        "Deny"
    ]
    params = kube_emulator.get_object("v1", "ConfigMap", "gpucloud-admission", "tenant-acme")
    assert params["data"]["allowedResources"] == "nvidia.com/gpu,nvidia.com/mig-1g.18gb"
    assert driver.reconcile(tenants, complete=True).writes == 0


def test_params_or_a_policy_edited_by_hand_are_restored_and_counted(kube_emulator, kube_client):
    driver = KubernetesDriver(kube_client, ClusterProfile())
    tenants = [make_tenant()]
    driver.reconcile(tenants, complete=True)
    widened = "nvidia.com/gpu,nvidia.com/mig-1g.18gb,nvidia.com/gpu.shared"
    kube_emulator.edit_object(
        "v1", "ConfigMap", "gpucloud-admission", "tenant-acme", {"data": {"allowedResources": widened}}
    )
    kube_emulator.edit_object(
        API, BINDING, "gpucloud-pods-standard", None, {"spec": {"validationActions": ["Warn"]}}
    )

    result = driver.reconcile(tenants, complete=True)

    assert (result.drift_repaired, result.writes) == (2, 2)
    params = kube_emulator.get_object("v1", "ConfigMap", "gpucloud-admission", "tenant-acme")
    assert params["data"]["allowedResources"] == "nvidia.com/gpu,nvidia.com/mig-1g.18gb"
    assert kube_emulator.get_object(API, BINDING, "gpucloud-pods-standard")["spec"]["validationActions"] == [
        "Deny"
    ]


def test_the_last_tenant_of_a_tier_takes_its_policy_and_binding_with_it(kube_emulator, kube_client):
    driver = KubernetesDriver(kube_client, ClusterProfile())
    isolated = make_tenant("b", trust_tier="isolated")
    driver.reconcile([make_tenant("a"), isolated], complete=True)

    driver.reconcile([make_tenant("a"), dataclasses.replace(isolated, desired="absent")], complete=True)

    assert kube_emulator.get_object(API, BINDING, "gpucloud-pods-isolated") is None
    assert kube_emulator.get_object(API, POLICY, "gpucloud-pods-isolated") is None
    assert kube_emulator.get_object(API, POLICY, "gpucloud-pods-standard")


def test_configmaps_gpucloud_writes_for_the_gpu_operator_are_not_pruned(kube_emulator, kube_client):
    """The partition pass's MIG and device-plugin ConfigMaps are gpucloud's too (SHARED), but not the
    driver's: it lists only ConfigMaps labelled as admission params."""
    mig_config = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "gpucloud-mig-config",
            "namespace": "gpu-operator",
            "labels": {"app.kubernetes.io/managed-by": "gpucloud", "gpucloud.io/tenant": "gpucloud.shared"},
        },
        "data": {"config.yaml": "version: v1\n"},
    }
    kube_emulator.put_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gpu-operator"}})
    kube_emulator.put_object(mig_config)
    driver = KubernetesDriver(kube_client, ClusterProfile())

    driver.reconcile([make_tenant()], complete=True)
    driver.reconcile([make_tenant(desired="absent")], complete=True)

    assert kube_emulator.get_object("v1", "ConfigMap", "gpucloud-mig-config", "gpu-operator")
    assert kube_emulator.get_object("v1", "ConfigMap", admission.PARAMS, "tenant-acme") is None


def test_a_cluster_older_than_1_30_cannot_be_given_the_policies():
    """Before Kubernetes 1.30 there is no admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy: every
    tenant fails with what is missing, and nothing is written (conformance says so: `admission_policies`)."""
    with start_emulator(crds=("kueue", "flux"), server_version=(1, 29)) as old:
        driver = KubernetesDriver(api_client_for_url(old.url), ClusterProfile())
        result = driver.reconcile([make_tenant()], complete=True)

        assert "the cluster does not serve ValidatingAdmissionPolicy" in result.errors["acme"]
        assert old.get_object("v1", "Namespace", "tenant-acme") is None
