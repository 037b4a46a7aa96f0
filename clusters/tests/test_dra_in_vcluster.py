"""DRA from inside a tenant's vCluster, reconciled on the stand-in host cluster: the HelmRelease carries the
syncs and the claim templates, the host namespace keeps no gpucloud claim template (an earlier pass's is
pruned), and the copies vCluster syncs there are left alone."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from clusters.reconcile import tenants as reconcile
from clusters.render.dra import GPU_CLASS
from clusters.tests.conftest import kubeconfig_for
from clusters.tests.test_partitions import DRA, MIG_1G, hard, tenant
from fleet.models import HostCluster
from gpucloud.kube.api import ApiStatusError, KubeApi, RetryPolicy, api_client_for_url
from gpucloud.kube.meta import MANAGED_BY, MANAGER, TENANT
from tests.judges.admission import admit_stored_claim
from tests.kube_emulator import gpu_node, start_emulator

NS = "tenant-vision"


def template(name: str, labels: dict[str, str]) -> dict[str, Any]:
    request = {"name": "gpu", "exactly": {"deviceClassName": "gpucloud-h200-141gb", "count": 1}}
    return {
        "apiVersion": DRA,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": NS, "labels": labels},
        "spec": {"spec": {"devices": {"requests": [request]}}},
    }


def test_the_tenants_claim_templates_live_in_its_vcluster_and_its_claims_sync_to_the_host(
    api, admin, gpu_catalog
):
    with start_emulator(crds=("kueue", "flux", "gpu-operator", "dra")) as em:
        em.put_object(gpu_node("h200-1"))
        em.put_object({"apiVersion": DRA, "kind": "DeviceClass", "metadata": {"name": "gpu.nvidia.com"}})
        body = {"name": "gpu-east", "kubeconfig": kubeconfig_for(em.url), "scheduler": "kueue"}
        assert api(admin).post("/api/v1/host-clusters/", body, format="json").status_code == 201
        cluster = HostCluster.objects.get(name="gpu-east")
        tenant(api, admin, "vision", {"h200-141gb": 2, MIG_1G: 7})
        reconcile.reconcile_host_cluster(cluster)
        # What an earlier pass rendered in the host namespace, and what vCluster synced there.
        em.put_object(template("h200-141gb", {MANAGED_BY: MANAGER, TENANT: "vision"}))
        em.put_object(template("h200-141gb-x-default-x-vision", {GPU_CLASS: "h200-141gb"}))

        reconcile.reconcile_host_cluster(cluster)

        assert em.get_object(DRA, "ResourceClaimTemplate", "h200-141gb", NS) is None
        assert em.get_object(DRA, "ResourceClaimTemplate", "h200-141gb-x-default-x-vision", NS) is not None
        values = em.get_object("helm.toolkit.fluxcd.io/v2", "HelmRelease", "vision", NS)["spec"]["values"]
        assert values["sync"]["toHost"]["resourceClaims"] == {"enabled": True}
        assert values["sync"]["toHost"]["resourceClaimTemplates"] == {"enabled": True}
        (expression,) = values["sync"]["fromHost"]["deviceClasses"]["selector"]["matchExpressions"]
        assert expression["values"] == ["h200-141gb", MIG_1G]
        inside = list(yaml.safe_load_all(values["experimental"]["deploy"]["vcluster"]["manifests"]))
        assert {(t["metadata"]["namespace"], t["metadata"]["name"]) for t in inside} == {
            ("default", "h200-141gb"),
            ("default", MIG_1G),
        }
        # The claims policy and its binding, and the tenant's allowed classes in its admission params.
        policies = "admissionregistration.k8s.io/v1"
        assert em.get_object(policies, "ValidatingAdmissionPolicy", "gpucloud-claims") is not None
        assert em.get_object(policies, "ValidatingAdmissionPolicyBinding", "gpucloud-claims") is not None
        params = em.get_object("v1", "ConfigMap", "gpucloud-admission", NS)["data"]
        assert params["deviceClasses"] == "gpucloud-h200-141gb,gpucloud-h200-141gb.mig-1g.18gb"
        # Every class's devices are in the quota: the held ones at guaranteed + burst, the driver's own 0.
        quota = hard(em, "vision")
        assert quota["gpucloud-h200-141gb.deviceclass.resource.k8s.io/devices"] == "2"
        assert quota["gpu.nvidia.com.deviceclass.resource.k8s.io/devices"] == "0"


def test_a_claim_template_synced_for_a_class_the_tenant_does_not_hold_is_refused_on_the_host(
    api, admin, gpu_catalog
):
    """As vCluster's syncer creates them in the host namespace: its own class passes, another model's is
    refused with the class and what is allowed."""
    with start_emulator(crds=("kueue", "flux", "gpu-operator", "dra")) as em:
        em.put_object(gpu_node("h200-1"))
        em.put_object({"apiVersion": DRA, "kind": "DeviceClass", "metadata": {"name": "gpu.nvidia.com"}})
        body = {"name": "gpu-east", "kubeconfig": kubeconfig_for(em.url), "scheduler": "kueue"}
        assert api(admin).post("/api/v1/host-clusters/", body, format="json").status_code == 201
        tenant(api, admin, "vision", {"h200-141gb": 2})
        reconcile.reconcile_host_cluster(HostCluster.objects.get(name="gpu-east"))
        em.emulator.claim_admission = admit_stored_claim
        host = KubeApi(api_client_for_url(em.url), RetryPolicy(attempts=1, timeout_seconds=5.0))
        path = f"/apis/{DRA}/namespaces/{NS}/resourceclaimtemplates"

        def create(name: str, device_class: str) -> None:
            manifest = template(name, {GPU_CLASS: "h200-141gb"})
            manifest["spec"]["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] = device_class
            host.request("POST", path, body=manifest, content_type="application/json")

        create("train-x-default-x-vision", "gpucloud-h200-141gb")
        with pytest.raises(ApiStatusError) as refused:
            create("other-x-default-x-vision", "gpucloud-l40s-48gb")
        assert refused.value.status == 403
        assert "asks for DeviceClass gpucloud-l40s-48gb" in str(refused.value)
        assert "it may claim: gpucloud-h200-141gb" in str(refused.value)
        assert em.get_object(DRA, "ResourceClaimTemplate", "other-x-default-x-vision", NS) is None
