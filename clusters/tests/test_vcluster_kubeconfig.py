"""The vCluster's kubeconfig, read from its `vc-<name>` secret on the host (emulated API server)."""

from __future__ import annotations

import pytest
import yaml

from clusters.drivers.kubeconfig import KubeconfigNotReady, read_kubeconfig
from clusters.drivers.kubernetes import KubernetesDriver
from clusters.render import ClusterProfile
from clusters.tests.conftest import make_tenant


def test_the_kubeconfig_is_read_from_the_vcluster_secret_with_the_server_rewritten(
    kube_emulator, kube_client
):
    driver = KubernetesDriver(kube_client, ClusterProfile())
    driver.reconcile([make_tenant()], complete=True)
    with pytest.raises(KubeconfigNotReady):
        read_kubeconfig(kube_client, "tenant-acme", "acme", "https://acme.vc.example.com")
    kube_emulator.make_vcluster_ready("tenant-acme", "acme")

    text = read_kubeconfig(kube_client, "tenant-acme", "acme", "https://acme.vc.example.com")

    (cluster,) = yaml.safe_load(text)["clusters"]
    assert cluster["cluster"]["server"] == "https://acme.vc.example.com"
    assert cluster["cluster"]["certificate-authority-data"]
