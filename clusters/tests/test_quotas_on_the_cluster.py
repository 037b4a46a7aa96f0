"""A reconcile pass over a registered host cluster: every GPU resource its nodes offer in each tenant's
ResourceQuota, and what the conformance report says of per-model quotas (against the emulated API server)."""

from __future__ import annotations

from typing import Any

from clusters.reconcile import tenants as reconcile
from clusters.render.resourcequota import PER_MODEL
from clusters.tests.conftest import kubeconfig_for
from fleet.models import HostCluster
from tests.kube_emulator import gpu_node


def register(api: Any, admin: Any, em: Any, scheduler: str) -> HostCluster:
    em.put_object(gpu_node("h200-1"))
    em.put_object(gpu_node("l40s-1", product="NVIDIA-L40S"))
    body = {"name": "gpu-east", "kubeconfig": kubeconfig_for(em.url), "scheduler": scheduler}
    assert api(admin).post("/api/v1/host-clusters/", body, format="json").status_code == 201
    return HostCluster.objects.get(name="gpu-east")


def tenant(api: Any, admin: Any, slug: str, quotas: dict[str, int]) -> None:
    client = api(admin)
    body = {"slug": slug, "host_cluster": "gpu-east", "trust_tier": "standard"}
    assert client.post("/api/v1/tenants/", body, format="json").status_code == 201
    for gpu_class, units in quotas.items():
        response = client.put(
            f"/api/v1/tenants/{slug}/quotas/{gpu_class}/", {"guaranteed": units}, format="json"
        )
        assert response.status_code in (200, 201), response.json()


def test_a_kai_tenant_holding_two_models_without_dra_is_named_in_the_report(
    kube_emulator, api, admin, gpu_catalog
):
    cluster = register(api, admin, kube_emulator, "kai")
    tenant(api, admin, "vision", {"h200-141gb": 4, "l40s-48gb": 2})
    tenant(api, admin, "speech", {"h200-141gb": 2})

    reconcile.reconcile_host_cluster(cluster)

    quota = kube_emulator.get_object("v1", "ResourceQuota", "gpucloud-gpu-quota", "tenant-vision")
    hard = quota["spec"]["hard"]
    assert hard["requests.nvidia.com/gpu"] == "6"
    assert hard["requests.nvidia.com/mig-1g.18gb"] == "0"  # the H200 node could be split; vision holds none
    assert hard["requests.nvidia.com/gpu.shared"] == "0"
    assert "only their sum holds" in quota["metadata"]["annotations"][PER_MODEL]
    speech = kube_emulator.get_object("v1", "ResourceQuota", "gpucloud-gpu-quota", "tenant-speech")
    assert PER_MODEL not in speech["metadata"]["annotations"]

    body = api(admin).get("/api/v1/host-clusters/gpu-east/conformance/").json()
    per_model = next(c for c in body["capabilities"] if c["name"] == "per_model_quotas")
    assert not per_model["found"]
    assert per_model["version"] == (
        "KAI without DRA: only the sum holds; tenants holding whole-GPU quotas of several models: vision"
    )
    assert "per_model_quotas" in body["missing"]
    cluster.refresh_from_db()
    assert "nvidia.com/mig-7g.141gb" in cluster.gpu_resources
    assert "nvidia.com/gpu" in cluster.gpu_resources


def test_a_second_pass_over_an_unchanged_cluster_writes_nothing_more(kube_emulator, api, admin, gpu_catalog):
    cluster = register(api, admin, kube_emulator, "kueue")
    tenant(api, admin, "vision", {"h200-141gb": 4})
    reconcile.reconcile_host_cluster(cluster)
    second = reconcile.reconcile_host_cluster(cluster)
    assert second.result.writes == 0
    assert second.db_writes == 0
