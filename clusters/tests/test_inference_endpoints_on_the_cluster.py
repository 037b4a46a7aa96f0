"""Inference endpoints kept on a Kubernetes host cluster by the reconciler (the API server stand-in): created,
restored after a hand edit, removed with the endpoint, and their status written back only when it changed."""

from __future__ import annotations

from typing import Any

import pytest

from clusters.reconcile import tenants as reconcile
from clusters.tests.conftest import kubeconfig_for
from core.audit import Actor
from fleet.models import GpuClass, HostCluster
from inference.models import InferenceEndpoint
from inference.services import create_endpoint, delete_endpoint
from tenants.models import Tenant
from tests.kube_emulator import gpu_node

NS = "tenant-vision"
KINDS = (
    ("apps/v1", "Deployment"),
    ("v1", "Service"),
    ("inference.networking.k8s.io/v1", "InferencePool"),
    ("gateway.networking.k8s.io/v1", "HTTPRoute"),
)


def register(api: Any, admin: Any, em: Any) -> HostCluster:
    em.put_object(gpu_node("h200-1"))
    body = {"name": "gpu-east", "kubeconfig": kubeconfig_for(em.url), "scheduler": "kueue"}
    assert api(admin).post("/api/v1/host-clusters/", body, format="json").status_code == 201
    client = api(admin)
    body = {"slug": "vision", "host_cluster": "gpu-east", "trust_tier": "standard"}
    assert client.post("/api/v1/tenants/", body, format="json").status_code == 201
    quota = {"guaranteed": 2, "burst": 2}
    assert client.put("/api/v1/tenants/vision/quotas/h200-141gb/", quota, format="json").status_code == 201
    return HostCluster.objects.get(name="gpu-east")


def endpoint(admin: Any) -> InferenceEndpoint:
    return create_endpoint(
        actor=Actor.of(admin),
        tenant=Tenant.objects.get(slug="vision"),
        name="chat",
        model_name="Qwen/Qwen3-8B",
        source_uri="hf://Qwen/Qwen3-8B",
        gpu_class=GpuClass.objects.get(name="h200-141gb"),
        gpus_per_replica=2,
    )


@pytest.fixture
def cluster(kube_emulator, api, admin, gpu_catalog) -> HostCluster:
    kube_emulator.register_crds("gateway-api-inference")
    return register(api, admin, kube_emulator)


def test_the_reconciler_creates_restores_and_deletes_an_endpoints_objects(cluster, kube_emulator, admin, api):
    chat = endpoint(admin)
    reconcile.reconcile_host_cluster(cluster)
    report = api(admin).get("/api/v1/host-clusters/gpu-east/conformance/").json()
    assert "inference_routing" not in report["missing"]
    assert "kserve" in report["missing"]

    for api_version, kind in KINDS:
        assert kube_emulator.get_object(api_version, kind, "ie-chat", NS) is not None, kind
    deployment = kube_emulator.get_object("apps/v1", "Deployment", "ie-chat", NS)
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert labels["kueue.x-k8s.io/queue-name"] == "default"
    assert (
        deployment["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"]
        == "2"
    )

    kube_emulator.edit_object("apps/v1", "Deployment", "ie-chat", NS, {"spec": {"replicas": 4}})
    outcome = reconcile.reconcile_host_cluster(cluster)
    assert outcome.result.drift_repaired == 1
    assert kube_emulator.get_object("apps/v1", "Deployment", "ie-chat", NS)["spec"]["replicas"] == 1

    delete_endpoint(actor=Actor.of(admin), endpoint=chat)
    reconcile.reconcile_host_cluster(cluster)
    for api_version, kind in KINDS:
        assert kube_emulator.get_object(api_version, kind, "ie-chat", NS) is None, kind


def test_the_model_servers_status_flows_back_and_an_unchanged_one_writes_nothing(
    cluster, kube_emulator, admin
):
    chat = endpoint(admin)
    reconcile.reconcile_host_cluster(cluster)
    chat.refresh_from_db()
    assert (chat.replicas_ready, chat.model_loaded) == (0, False)
    assert chat.status_message.startswith("0 of 1 replicas ready")

    kube_emulator.edit_object("apps/v1", "Deployment", "ie-chat", NS, {"status": {"readyReplicas": 1}})
    reconcile.reconcile_host_cluster(cluster)
    chat.refresh_from_db()
    assert (chat.replicas_ready, chat.model_loaded, chat.status_message) == (1, True, "")
    assert chat.observed_at is not None

    again = reconcile.reconcile_host_cluster(cluster)
    assert again.result.writes == 0
    assert again.db_writes == 0


def test_a_cluster_without_the_inference_extension_says_so_on_the_endpoint(
    kube_emulator, api, admin, gpu_catalog
):
    cluster = register(api, admin, kube_emulator)
    chat = endpoint(admin)
    reconcile.reconcile_host_cluster(cluster)

    assert kube_emulator.get_object("apps/v1", "Deployment", "ie-chat", NS) is None
    chat.refresh_from_db()
    assert "Inference Extension are not installed" in chat.status_message
    report = api(admin).get("/api/v1/host-clusters/gpu-east/conformance/").json()
    assert "inference_routing" in report["missing"]
