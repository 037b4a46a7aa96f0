"""Conformance names whether a host cluster can enforce gpucloud's admission policies (Kubernetes 1.30+)."""

from __future__ import annotations

from clusters.drivers.conformance import check
from clusters.drivers.discovery import ClusterDiscovery, discover
from gpucloud.kube.api import KubeApi, api_client_for_url
from tests.kube_emulator import start_emulator


def _admission_policies(server_version: tuple[int, int]) -> dict[str, object]:
    with start_emulator(crds=("kueue",), server_version=server_version) as em:
        found = discover(KubeApi(api_client_for_url(em.url)), conformance=True)
    caps = check(found, mig_configmap="mig", plugin_configmap="plugin")
    return next(c for c in caps if c.name == "admission_policies").as_dict()


def test_a_cluster_serving_validating_admission_policies_has_them():
    cap = _admission_policies((1, 33))
    assert cap["found"]
    assert cap["version"] == "Kubernetes v1.33.0 · admissionregistration.k8s.io/v1"


def test_a_cluster_older_than_1_30_lacks_them_and_says_what_then_does_not_hold():
    cap = _admission_policies((1, 29))
    assert not cap["found"]
    assert "nothing on the host refuses what a tenant's vCluster syncs" in str(cap["without"])
    assert "1.30" in str(cap["how"])


def test_serving_admissionregistration_v1_webhooks_only_is_not_enough():
    """A 1.29 API server serves admissionregistration.k8s.io/v1 (webhooks) but its policies are v1beta1."""
    old = ClusterDiscovery(
        "v1.29.4", {"admissionregistration.k8s.io": ("v1", "v1beta1")}, [], False, None, ""
    )
    (cap,) = [
        c for c in check(old, mig_configmap="m", plugin_configmap="p") if c.name == "admission_policies"
    ]
    assert not cap.found
    new = ClusterDiscovery("v1.31.2-eks-1", {"admissionregistration.k8s.io": ("v1",)}, [], False, None, "")
    (cap,) = [
        c for c in check(new, mig_configmap="m", plugin_configmap="p") if c.name == "admission_policies"
    ]
    assert cap.found
