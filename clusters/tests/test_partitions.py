"""GPU partitions on a Kubernetes host cluster (issue 15): MIG layouts from guarantees, time-slicing for
shared classes, capacity counted only once advertised. The cluster is the API stand-in with GPU nodes
labelled as the GPU Operator labels them; `play_gpu_operator` plays the MIG manager and the device plugin.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
import yaml
from django.utils import timezone

from clusters.reconcile import tenants as reconcile
from clusters.tests.conftest import kubeconfig_for
from fleet.models import Gpu, HostCluster, Node, NodePartition
from health.models import HealthEvent
from health.services import quarantines
from tenants.capacity import capacity_table
from tests.kube_emulator import gpu_node, gpu_pod, start_emulator

OPERATOR_NS = "gpu-operator"
MIG_1G = "h200-141gb.mig-1g.18gb"


@pytest.fixture
def cluster(kube_emulator, api, admin, gpu_catalog):
    """`gpu-east`: two 8 × H200 nodes (all GPUs whole), the GPU Operator's namespace, Kueue and Flux."""
    kube_emulator.put_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": OPERATOR_NS}})
    for n in (1, 2):
        kube_emulator.put_object(gpu_node(f"h200-{n}"))
    body = {"name": "gpu-east", "kubeconfig": kubeconfig_for(kube_emulator.url), "scheduler": "kueue"}
    assert api(admin).post("/api/v1/host-clusters/", body, format="json").status_code == 201
    return HostCluster.objects.get(name="gpu-east")


def tenant(api: Any, admin: Any, slug: str, quotas: dict[str, int], tier: str = "standard") -> None:
    client = api(admin)
    body = {"slug": slug, "host_cluster": "gpu-east", "trust_tier": tier}
    assert client.post("/api/v1/tenants/", body, format="json").status_code == 201
    for gpu_class, units in quotas.items():
        response = client.put(
            f"/api/v1/tenants/{slug}/quotas/{gpu_class}/", {"guaranteed": units}, format="json"
        )
        assert response.status_code in (200, 201), response.json()


def label(em: Any, node: str, key: str) -> str | None:
    return (em.get_object("v1", "Node", node)["metadata"].get("labels") or {}).get(key)


def taints(em: Any, node: str) -> list[dict[str, str]]:
    return (em.get_object("v1", "Node", node).get("spec") or {}).get("taints") or []


def mig_configs(em: Any) -> dict[str, Any]:
    configmap = em.get_object("v1", "ConfigMap", "gpucloud-mig-config", OPERATOR_NS)
    configs: dict[str, Any] = yaml.safe_load(configmap["data"]["config.yaml"])["mig-configs"]
    return configs


def hard(em: Any, slug: str) -> dict[str, str]:
    quota = em.get_object("v1", "ResourceQuota", "gpucloud-gpu-quota", f"tenant-{slug}")
    limits: dict[str, str] = quota["spec"]["hard"]
    return limits


def advertised(cluster: HostCluster, gpu_class: str) -> int | None:
    return next(r.advertised for r in capacity_table(cluster) if r.gpu_class == gpu_class)


def test_a_mig_guarantee_becomes_a_layout_a_label_and_slices_counted_only_after_success(
    cluster, kube_emulator, api, admin
):
    tenant(api, admin, "vision", {MIG_1G: 14})

    reconcile.reconcile_host_cluster(cluster)

    # Two GPUs of one node sliced into 7 × 1g.18gb; its other six stay whole.
    name = label(kube_emulator, "h200-1", "nvidia.com/mig.config")
    assert name.startswith("gpucloud-")
    assert label(kube_emulator, "h200-2", "nvidia.com/mig.config") is None
    assert label(kube_emulator, "h200-1", "nvidia.com/mig.config.state") == "pending"
    assert mig_configs(kube_emulator)[name] == [
        {"devices": [0, 1], "mig-enabled": True, "mig-devices": {"1g.18gb": 7}},
        {"devices": [2, 3, 4, 5, 6, 7], "mig-enabled": False},
    ]
    assert mig_configs(kube_emulator)["all-disabled"] == [{"devices": "all", "mig-enabled": False}]
    # Nothing advertises the slices yet: the tenant's quota and the capacity count none of them.
    assert hard(kube_emulator, "vision")["requests.nvidia.com/mig-1g.18gb"] == "0"
    assert advertised(cluster, MIG_1G) == 0

    kube_emulator.play_gpu_operator("h200-1")
    reconcile.reconcile_host_cluster(cluster)

    assert hard(kube_emulator, "vision")["requests.nvidia.com/mig-1g.18gb"] == "14"
    assert advertised(cluster, MIG_1G) == 14
    assert advertised(cluster, "h200-141gb") == 14
    row = NodePartition.objects.get(node__name="h200-1")
    assert (row.mig_state, row.layouts[0], row.layouts[7]) == ("success", ["1g.18gb"] * 7, [])

    writes = kube_emulator.writes
    reconcile.reconcile_host_cluster(cluster)
    assert kube_emulator.writes == writes  # settled: a pass costs no writes


def quarantine(node: str, gpu: int | None = None) -> None:
    """Take a GPU (or a whole node) out of service as the health pass does: a fatal event, then quarantine."""
    target = Node.objects.get(name=node)
    device = Gpu.objects.get(node=target, index=gpu) if gpu is not None else None
    now = timezone.now()
    event = HealthEvent.objects.create(
        host_cluster=target.host_cluster, node=target, gpu=device,
        subject=f"gpu:{gpu}" if gpu is not None else "node", signal="xid", value="79", severity="fatal",
        action="quarantine", source="dcgm", first_seen=now, last_seen=now,
    )  # fmt: skip
    assert quarantines.quarantine(event, now) is not None


def test_a_quarantined_gpu_gets_no_slices_counts_for_nothing_and_comes_back_once_released(
    cluster, kube_emulator, api, admin
):
    tenant(api, admin, "vision", {MIG_1G: 14})
    reconcile.reconcile_host_cluster(cluster)
    kube_emulator.play_gpu_operator("h200-1")
    reconcile.reconcile_host_cluster(cluster)
    assert advertised(cluster, MIG_1G) == 14
    assert advertised(cluster, "h200-141gb") == 14

    quarantine("h200-1", 0)  # a sliced GPU of an idle node
    reconcile.reconcile_host_cluster(cluster)

    # Its seven slices are no longer counted, though the device plugin still lists them, and the node is
    # laid out again: GPU 0 with MIG disabled, its slices moved to a GPU in service (none counted while
    # the change is pending, as for any change).
    assert advertised(cluster, MIG_1G) == 0
    assert hard(kube_emulator, "vision")["requests.nvidia.com/mig-1g.18gb"] == "0"
    name = label(kube_emulator, "h200-1", "nvidia.com/mig.config")
    assert label(kube_emulator, "h200-1", "nvidia.com/mig.config.state") == "pending"
    config = mig_configs(kube_emulator)[name]
    sliced = [d for group in config if group["mig-enabled"] for d in group["devices"]]
    assert 0 not in sliced
    assert len(sliced) == 2
    assert {"devices": [0, *range(3, 8)], "mig-enabled": False} in config
    kube_emulator.play_gpu_operator("h200-1")
    reconcile.reconcile_host_cluster(cluster)
    assert advertised(cluster, MIG_1G) == 14
    assert advertised(cluster, "h200-141gb") == 13  # 16 GPUs, 2 sliced, 1 out of service
    assert NodePartition.objects.get(node__name="h200-1").layouts[0] == []
    assert hard(kube_emulator, "vision")["requests.nvidia.com/mig-1g.18gb"] == "14"

    body = {"gpu": 0, "reason": "replaced"}
    response = api(admin).post("/api/v1/host-clusters/gpu-east/nodes/h200-1/release/", body, format="json")
    assert response.status_code == 200, response.json()
    writes = kube_emulator.writes
    reconcile.reconcile_host_cluster(cluster)
    # Back at the next pass: counted again, and the layouts in place are kept (no node relabelled).
    assert advertised(cluster, "h200-141gb") == 14
    assert advertised(cluster, MIG_1G) == 14
    assert label(kube_emulator, "h200-1", "nvidia.com/mig.config") == name
    assert kube_emulator.writes == writes


def test_a_quarantined_gpu_of_a_busy_node_keeps_its_layout_but_its_slices_are_not_counted(
    cluster, kube_emulator, api, admin
):
    tenant(api, admin, "vision", {MIG_1G: 7})
    reconcile.reconcile_host_cluster(cluster)
    kube_emulator.play_gpu_operator("h200-1")
    kube_emulator.put_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "jobs"}})
    kube_emulator.put_object(gpu_pod("serve-0", "jobs", "h200-1", "nvidia.com/mig-1g.18gb"))
    reconcile.reconcile_host_cluster(cluster)
    name = label(kube_emulator, "h200-1", "nvidia.com/mig.config")
    sliced = next(g["devices"][0] for g in mig_configs(kube_emulator)[name] if g["mig-enabled"])
    assert advertised(cluster, MIG_1G) == 7

    quarantine("h200-1", sliced)
    reconcile.reconcile_host_cluster(cluster)

    # The busy node is not reconfigured; its quarantined GPU's slices supply nothing, so the idle node
    # takes the layout instead.
    assert label(kube_emulator, "h200-1", "nvidia.com/mig.config") == name
    assert advertised(cluster, MIG_1G) == 0
    assert label(kube_emulator, "h200-2", "nvidia.com/mig.config").startswith("gpucloud-")
    assert NodePartition.objects.get(node__name="h200-1").advertised == {"h200-141gb": 7}
    kube_emulator.play_gpu_operator("h200-2")
    reconcile.reconcile_host_cluster(cluster)
    assert advertised(cluster, MIG_1G) == 7

    # Once idle, the quarantined GPU's index is laid out with MIG disabled.
    kube_emulator.remove_object("v1", "Pod", "serve-0", "jobs")
    reconcile.reconcile_host_cluster(cluster)
    new = label(kube_emulator, "h200-1", "nvidia.com/mig.config")
    assert new is not None
    assert new != name
    assert not any(group["mig-enabled"] for group in mig_configs(kube_emulator)[new])


def test_a_quarantined_node_is_held_and_counts_for_nothing(cluster, kube_emulator, api, admin):
    tenant(api, admin, "vision", {MIG_1G: 7})
    reconcile.reconcile_host_cluster(cluster)
    kube_emulator.play_gpu_operator("h200-1")
    reconcile.reconcile_host_cluster(cluster)
    name = label(kube_emulator, "h200-1", "nvidia.com/mig.config")

    quarantine("h200-1")
    reconcile.reconcile_host_cluster(cluster)

    # Not reconfigured while out (the MIG manager is not sent to a faulty node), counted for nothing, and
    # the demand laid out on the node in service.
    assert label(kube_emulator, "h200-1", "nvidia.com/mig.config") == name
    assert NodePartition.objects.get(node__name="h200-1").advertised == {}
    assert label(kube_emulator, "h200-2", "nvidia.com/mig.config").startswith("gpucloud-")
    kube_emulator.play_gpu_operator("h200-2")
    reconcile.reconcile_host_cluster(cluster)
    assert advertised(cluster, MIG_1G) == 7
    assert advertised(cluster, "h200-141gb") == 7


def test_a_busy_gpu_node_is_never_reconfigured_and_the_need_is_reported(cluster, kube_emulator, api, admin):
    kube_emulator.put_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "jobs"}})
    kube_emulator.put_object(gpu_pod("train-0", "jobs", "h200-1"))
    tenant(api, admin, "vision", {MIG_1G: 14})

    reconcile.reconcile_host_cluster(cluster)

    # The free node takes the layout; the busy one keeps its labels.
    assert label(kube_emulator, "h200-1", "nvidia.com/mig.config") is None
    assert label(kube_emulator, "h200-2", "nvidia.com/mig.config").startswith("gpucloud-")

    # Both nodes busy: a layout that must grow is waited for and reported, never applied.
    kube_emulator.put_object(gpu_pod("serve-0", "jobs", "h200-2", "nvidia.com/mig-1g.18gb"))
    kube_emulator.play_gpu_operator("h200-2")
    api(admin).put(f"/api/v1/tenants/vision/quotas/{MIG_1G}/", {"guaranteed": 28}, format="json")
    before = kube_emulator.get_object("v1", "Node", "h200-2")["metadata"]["labels"]
    reconcile.reconcile_host_cluster(cluster)

    assert kube_emulator.get_object("v1", "Node", "h200-2")["metadata"]["labels"] == before
    assert label(kube_emulator, "h200-1", "nvidia.com/mig.config") is None
    cluster.refresh_from_db()
    assert cluster.partitions["busy"] == ["h200-1", "h200-2"]
    assert cluster.partitions["unsatisfied"] == {MIG_1G: 14}
    assert NodePartition.objects.get(node__name="h200-2").busy
    # One busy node is cordoned for MIG (the taint keeps new pods off; running ones are left to finish).
    assert cluster.partitions["cordoned"] == ["h200-1"]
    assert "cordoned for MIG" in cluster.partitions["waiting"]["h200-1"]
    assert taints(kube_emulator, "h200-1") == [
        {"key": "gpucloud.io/mig-reconfigure", "value": "pending", "effect": "NoSchedule"}
    ]

    # Its pod finishes: the node is laid out, and uncordoned once the MIG manager reports success.
    kube_emulator.remove_object("v1", "Pod", "train-0", "jobs")
    reconcile.reconcile_host_cluster(cluster)
    assert label(kube_emulator, "h200-1", "nvidia.com/mig.config").startswith("gpucloud-")
    assert taints(kube_emulator, "h200-1") != []
    kube_emulator.play_gpu_operator("h200-1")
    reconcile.reconcile_host_cluster(cluster)
    assert taints(kube_emulator, "h200-1") == []
    assert hard(kube_emulator, "vision")["requests.nvidia.com/mig-1g.18gb"] == "28"


def test_a_failed_layout_is_reported_and_retried_with_backoff(cluster, kube_emulator, api, admin, settings):
    settings.MIG_RETRY_SECONDS = 300
    tenant(api, admin, "vision", {MIG_1G: 7})
    reconcile.reconcile_host_cluster(cluster)
    first = label(kube_emulator, "h200-1", "nvidia.com/mig.config")

    kube_emulator.play_gpu_operator("h200-1", mig="failed")
    reconcile.reconcile_host_cluster(cluster)

    cluster.refresh_from_db()
    assert cluster.partitions["failed"] == ["h200-1"]
    assert "retrying at" in cluster.partitions["waiting"]["h200-1"]
    row = NodePartition.objects.get(node__name="h200-1")
    assert row.failures == 1
    assert row.retry_at is not None
    assert row.retry_at > timezone.now() + timedelta(seconds=250)
    assert hard(kube_emulator, "vision")["requests.nvidia.com/mig-1g.18gb"] == "0"
    reconcile.reconcile_host_cluster(cluster)
    assert label(kube_emulator, "h200-1", "nvidia.com/mig.config") == first  # not before the backoff ends

    NodePartition.objects.filter(pk=row.pk).update(retry_at=timezone.now() - timedelta(seconds=1))
    reconcile.reconcile_host_cluster(cluster)

    # The same layout under a new name, so that the label changes and the MIG manager runs again.
    assert label(kube_emulator, "h200-1", "nvidia.com/mig.config") == f"{first}-r1"
    assert label(kube_emulator, "h200-1", "nvidia.com/mig.config.state") == "pending"
    assert mig_configs(kube_emulator)[f"{first}-r1"] == mig_configs(kube_emulator)[first]
    kube_emulator.play_gpu_operator("h200-1")
    reconcile.reconcile_host_cluster(cluster)
    assert hard(kube_emulator, "vision")["requests.nvidia.com/mig-1g.18gb"] == "7"
    assert NodePartition.objects.get(pk=row.pk).failures == 0


def test_at_most_n_nodes_change_at_a_time(cluster, kube_emulator, api, admin, settings):
    settings.MIG_MAX_NODES = 1
    tenant(api, admin, "vision", {MIG_1G: 63})  # nine GPUs of slices: both nodes must change

    reconcile.reconcile_host_cluster(cluster)
    assert label(kube_emulator, "h200-1", "nvidia.com/mig.config").startswith("gpucloud-")
    assert label(kube_emulator, "h200-2", "nvidia.com/mig.config") is None
    cluster.refresh_from_db()
    assert "at most 1 nodes change at a time" in cluster.partitions["waiting"]["h200-2"]

    reconcile.reconcile_host_cluster(cluster)  # still pending: no second node yet
    assert label(kube_emulator, "h200-2", "nvidia.com/mig.config") is None

    kube_emulator.play_gpu_operator("h200-1")
    reconcile.reconcile_host_cluster(cluster)
    assert label(kube_emulator, "h200-2", "nvidia.com/mig.config").startswith("gpucloud-")
    kube_emulator.play_gpu_operator("h200-2")
    reconcile.reconcile_host_cluster(cluster)
    assert hard(kube_emulator, "vision")["requests.nvidia.com/mig-1g.18gb"] == "63"


def test_a_shared_class_of_a_trusted_tenant_gets_a_time_sliced_node(cluster, kube_emulator, api, admin):
    tenant(api, admin, "labs", {"h200-141gb.shared": 8}, tier="trusted")

    reconcile.reconcile_host_cluster(cluster)

    assert label(kube_emulator, "h200-1", "nvidia.com/device-plugin.config") == "gpucloud-time-sliced"
    assert label(kube_emulator, "h200-2", "nvidia.com/device-plugin.config") is None
    configmap = kube_emulator.get_object("v1", "ConfigMap", "gpucloud-device-plugin-config", OPERATOR_NS)
    sliced = yaml.safe_load(configmap["data"]["gpucloud-time-sliced"])["sharing"]["timeSlicing"]
    assert sliced["renameByDefault"] is True
    assert sliced["resources"] == [{"name": "nvidia.com/gpu", "replicas": 4}]
    assert yaml.safe_load(configmap["data"]["default"]) == {
        "version": "v1",
        "flags": {"migStrategy": "mixed"},
    }
    assert hard(kube_emulator, "labs")["requests.nvidia.com/gpu.shared"] == "0"

    kube_emulator.play_gpu_operator("h200-1")
    reconcile.reconcile_host_cluster(cluster)

    assert label(kube_emulator, "h200-1", "nvidia.com/gpu.replicas") == "4"
    assert advertised(cluster, "h200-141gb.shared") == 32  # gpu.count × gpu.replicas
    assert hard(kube_emulator, "labs")["requests.nvidia.com/gpu.shared"] == "8"


def test_a_node_whose_mig_config_someone_else_set_is_left_alone(cluster, kube_emulator, api, admin):
    kube_emulator.edit_object(
        "v1", "Node", "h200-1", None, {"metadata": {"labels": {"nvidia.com/mig.config": "all-1g.18gb"}}}
    )
    tenant(api, admin, "vision", {MIG_1G: 7})

    reconcile.reconcile_host_cluster(cluster)

    assert label(kube_emulator, "h200-1", "nvidia.com/mig.config") == "all-1g.18gb"
    assert label(kube_emulator, "h200-2", "nvidia.com/mig.config").startswith("gpucloud-")


def test_a_hami_cluster_gets_hami_names_in_the_quota_and_others_refuse_hami_classes(
    kube_emulator, api, admin, gpu_catalog
):
    kube_emulator.put_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": OPERATOR_NS}})
    node = gpu_node("h200-1")
    node["metadata"]["annotations"] = {
        "hami.io/node-nvidia-register": "GPU-0,10,143360,100,NVIDIA-H200,0,true"
    }
    kube_emulator.put_object(node)
    body = {"name": "gpu-east", "kubeconfig": kubeconfig_for(kube_emulator.url), "scheduler": "kueue"}
    assert api(admin).post("/api/v1/host-clusters/", body, format="json").status_code == 201
    cluster = HostCluster.objects.get(name="gpu-east")
    assert cluster.addons["hami"] is True
    tenant(api, admin, "labs", {"h200-141gb.hami-25": 8}, tier="trusted")

    reconcile.reconcile_host_cluster(cluster)

    # Eight quarter GPUs: 8 vGPUs, each a quarter of 141 GB and 25 % of the cores; 0 of everything else the
    # cluster's H200s could be asked for by (time-sliced, every MIG profile).
    limits = hard(kube_emulator, "labs")
    assert {key: value for key, value in limits.items() if value != "0"} == {
        "requests.nvidia.com/gpu": "8",
        "requests.nvidia.com/gpumem": str(8 * 141 * 1024 // 4),
        "requests.nvidia.com/gpucores": "200",
    }
    assert {
        "requests.nvidia.com/gpu.shared",
        "requests.nvidia.com/mig-1g.18gb",
        "requests.nvidia.com/mig-7g.141gb",
    } < set(limits)
    row = next(r for r in capacity_table(cluster) if r.gpu_class == "h200-141gb.hami-25")
    assert (row.capacity, row.guaranteed) == (32, 8)  # four per GPU

    # Without HAMi on the cluster, a HAMi class is refused with the reason.
    HostCluster.objects.filter(pk=cluster.pk).update(addons={**cluster.addons, "hami": False})
    response = api(admin).put(
        "/api/v1/tenants/labs/quotas/h200-141gb.hami-50/", {"guaranteed": 2}, format="json"
    )
    assert response.status_code == 400
    assert "does not run HAMi" in response.json()["errors"]["gpu_class"][0]


DRA = "resource.k8s.io/v1"


def test_a_dra_cluster_gets_device_classes_claim_templates_and_device_quotas(api, admin, gpu_catalog):
    with start_emulator(crds=("kueue", "flux", "gpu-operator", "dra")) as em:
        em.put_object(gpu_node("h200-1"))
        driver_class = {"apiVersion": DRA, "kind": "DeviceClass", "metadata": {"name": "gpu.nvidia.com"}}
        em.put_object(driver_class)
        body = {"name": "gpu-east", "kubeconfig": kubeconfig_for(em.url), "scheduler": "kueue"}
        assert api(admin).post("/api/v1/host-clusters/", body, format="json").status_code == 201
        cluster = HostCluster.objects.get(name="gpu-east")
        assert cluster.addons["dra"]
        assert cluster.addons["nvidia_dra_driver"]
        tenant(api, admin, "vision", {"h200-141gb": 2, MIG_1G: 7})

        reconcile.reconcile_host_cluster(cluster)

        mig = em.get_object(DRA, "DeviceClass", "gpucloud-h200-141gb.mig-1g.18gb")
        expression = mig["spec"]["selectors"][0]["cel"]["expression"]
        assert "device.driver == 'gpu.nvidia.com'" in expression
        assert "device.attributes['gpu.nvidia.com'].profile == '1g.18gb'" in expression
        assert "'NVIDIA H200'" in expression
        assert ".type == 'mig'" in expression
        whole = em.get_object(DRA, "DeviceClass", "gpucloud-h200-141gb")
        assert ".type == 'gpu'" in whole["spec"]["selectors"][0]["cel"]["expression"]
        # The claim templates live inside the vCluster (applied by it, from its values), not on the host.
        assert em.get_object(DRA, "ResourceClaimTemplate", "h200-141gb.mig-1g.18gb", "tenant-vision") is None
        release = em.get_object("helm.toolkit.fluxcd.io/v2", "HelmRelease", "vision", "tenant-vision")
        values = release["spec"]["values"]
        assert values["sync"]["toHost"]["resourceClaims"] == {"enabled": True}
        assert values["sync"]["fromHost"]["deviceClasses"]["enabled"] is True
        inside = yaml.safe_load_all(values["experimental"]["deploy"]["vcluster"]["manifests"])
        template = next(t for t in inside if t["metadata"]["name"] == "h200-141gb.mig-1g.18gb")
        assert template["metadata"]["namespace"] == "default"
        assert mig["metadata"]["labels"]["gpucloud.io/gpu-class"] == "h200-141gb.mig-1g.18gb"
        (request,) = template["spec"]["spec"]["devices"]["requests"]
        assert request["exactly"] == {
            "deviceClassName": "gpucloud-h200-141gb.mig-1g.18gb",
            "allocationMode": "ExactCount",
            "count": 1,
        }
        quota = hard(em, "vision")
        assert quota["gpucloud-h200-141gb.deviceclass.resource.k8s.io/devices"] == "2"
        # MIG devices too count only once the node advertises them.
        assert quota["gpucloud-h200-141gb.mig-1g.18gb.deviceclass.resource.k8s.io/devices"] == "0"


def test_a_cluster_without_dra_gets_no_dra_objects(cluster, kube_emulator, api, admin):
    tenant(api, admin, "vision", {MIG_1G: 7})
    reconcile.reconcile_host_cluster(cluster)
    assert cluster.addons["dra"] is False
    assert not any("deviceclass" in key for key in hard(kube_emulator, "vision"))
    assert not any("deviceclasses" in path for _, path, _ in kube_emulator.log)


# What the API server keeps for its own Service in `default`.
API_SERVER_SLICE = {
    "apiVersion": "discovery.k8s.io/v1",
    "kind": "EndpointSlice",
    "metadata": {
        "name": "kubernetes",
        "namespace": "default",
        "labels": {"kubernetes.io/service-name": "kubernetes"},
    },
    "addressType": "IPv4",
    "endpoints": [{"addresses": ["10.0.0.10"], "conditions": {"ready": True}}],
    "ports": [{"name": "https", "port": 6443, "protocol": "TCP"}],
}


def test_the_conformance_report_lists_what_the_cluster_lacks_and_is_rechecked_every_pass(
    cluster, kube_emulator, api, admin, client
):
    kube_emulator.put_object(
        {
            "apiVersion": "nvidia.com/v1",
            "kind": "ClusterPolicy",
            "metadata": {"name": "cluster-policy"},
            "spec": {
                "mig": {"strategy": "mixed"},
                "migManager": {"config": {"name": "gpucloud-mig-config", "default": "all-disabled"}},
                "devicePlugin": {"config": {"name": "other-config"}},
            },
        }
    )
    kube_emulator.put_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kueue-system"}})
    manager = {"name": "manager", "image": "registry.k8s.io/kueue/kueue:v0.15.2"}
    kube_emulator.put_object(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {
                "name": "kueue-controller-manager",
                "namespace": "kueue-system",
                "labels": {"app.kubernetes.io/name": "kueue"},
            },
            "spec": {"template": {"spec": {"containers": [manager]}}},
        }
    )
    # Kueue queues pods, but only those of namespaces labelled team=ml: tenants' pods would bypass it.
    kueue_config = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "manageJobsWithoutQueueName": True,
        "managedJobsNamespaceSelector": {"matchLabels": {"team": "ml"}},
        "integrations": {"frameworks": ["batch/job", "pod"]},
        "fairSharing": {"preemptionStrategies": ["LessThanOrEqualToFinalShare"]},
        "resources": {"excludeResourcePrefixes": ["cpu", "memory"]},
    }
    kube_emulator.put_object(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "kueue-manager-config", "namespace": "kueue-system"},
            "data": {"controller_manager_config.yaml": yaml.safe_dump(kueue_config)},
        }
    )

    kube_emulator.put_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
    kube_emulator.put_object(API_SERVER_SLICE)
    reconcile.reconcile_host_cluster(cluster)

    body = api(admin).get("/api/v1/host-clusters/gpu-east/conformance/").json()
    found = {c["name"]: c for c in body["capabilities"]}
    assert found["kueue_pod_integration"]["found"]
    assert found["kueue_fair_sharing"]["found"]
    namespaces = found["kueue_tenant_namespaces"]
    assert "does not select isolated, standard, trusted tenant namespaces" in namespaces["version"]
    assert (
        "managedJobsNamespaceSelector: {matchExpressions: [{key: gpucloud.io/trust-tier" in namespaces["how"]
    )
    assert found["per_model_quotas"]["version"].startswith("Kueue flavors per model")

    assert found["pod_security"]["found"]  # the stand-in says v1.33
    assert found["network_policies"]["found"]  # Cilium is served
    assert found["api_server_addresses"]["version"] == "10.0.0.10/32"
    cluster.refresh_from_db()
    assert cluster.api_server_cidrs == ["10.0.0.10/32"]
    kueue = found["kueue"]
    assert kueue["found"]
    assert kueue["version"] == "kueue.x-k8s.io/v1beta2 (Kueue v0.15.2)"
    assert found["gpu_operator"]["found"]
    assert found["mig_manager"]["found"]
    sharing = found["device_plugin_sharing"]
    assert not sharing["found"]
    assert "gpucloud-device-plugin-config" in sharing["how"]
    assert "time-sliced" in sharing["without"]
    assert set(body["missing"]) == {
        "device_plugin_sharing",
        "hami",
        "dra",
        "dcgm_exporter",
        "node_problem_detector",
        "kueue_tenant_namespaces",
        "per_model_quotas",  # a pod Kueue does not manage is held by the ResourceQuota's sum only
        "kueue_visibility",  # the stand-in serves Kueue's visibility API only when a test asks it to
        "inference_routing",  # no Gateway API or Inference Extension: no inference endpoint is deployed
        "kserve",
    }

    # DRA installed later: the next pass notices, without registering the cluster again.
    kube_emulator.register_crds("dra")
    kube_emulator.put_object(
        {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu.nvidia.com"}}
    )
    reconcile.reconcile_host_cluster(cluster)
    body = api(admin).get("/api/v1/host-clusters/gpu-east/conformance/").json()
    assert "dra" not in body["missing"]
    cluster.refresh_from_db()
    assert cluster.addons["dra"]
    assert cluster.addons["nvidia_dra_driver"]

    client.force_login(admin)
    page = client.get("/host-clusters/").content.decode()
    assert "Conformance" in page
    assert "node_problem_detector" in page
    assert "missing" in page
    assert "helm install node-problem-detector" in page
    addons = page.split("<dt>Add-ons</dt><dd>", 1)[1].split("</dd>", 1)[0]
    assert "<code>kueue</code>" in addons
    assert "<code>hami</code>" not in addons  # only what was found


def test_a_simulated_host_cluster_reports_no_conformance(api, admin, demo_fleet):
    body = api(admin).get("/api/v1/host-clusters/demo/conformance/").json()
    assert (body["driver"], body["capabilities"], body["missing"]) == ("simulated", [], [])
