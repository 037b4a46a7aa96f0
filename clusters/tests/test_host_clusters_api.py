"""Issue 3 through the API: register a Kubernetes host cluster, run tenants on it, hand out kubeconfigs.

The cluster is the Kubernetes API stand-in (tests/kube_emulator.py) reached through the real client.
"""

import pytest
import yaml

from clusters.reconcile import tenants as reconcile
from clusters.tests.conftest import h200_node, kubeconfig_for
from core.models import AuditEvent
from fleet.models import HostCluster, Node
from tenants.models import Tenant
from tests.kube_emulator import VCLUSTER_ADMIN_TOKEN, Faults, start_emulator, start_virtual_cluster

KUEUE = "kueue.x-k8s.io/v1beta2"


def test_registration_discovers_the_cluster_and_keeps_the_kubeconfig_encrypted(host, api, admin):
    body = api(admin).get("/api/v1/host-clusters/gpu-east/").json()

    assert (body["driver"], body["scheduler"], body["state"]) == ("kubernetes", "kueue", "ready")
    assert body["server_version"] == "v1.33.0"
    assert body["addons"]["kueue"] is True
    assert (body["nodes"], body["gpus"]) == (2, 16)
    assert "kubeconfig" not in body
    assert "host-admin-token" not in str(body)
    assert "host-admin-token" not in host.kubeconfig_ciphertext
    assert AuditEvent.objects.get(action="host_cluster.register").after["gpu_nodes"] == 2


def test_imported_nodes_get_cpu_and_memory_from_their_allocatable(kube_emulator, api, admin, gpu_catalog):
    roomy, tight = h200_node("h200-1"), h200_node("h200-2")
    roomy["status"]["allocatable"] |= {"cpu": "96", "memory": "1056Gi"}
    tight["status"]["allocatable"] |= {"cpu": "95500m", "memory": "1000000Ki"}  # under 1 GiB
    for node in (roomy, tight):
        kube_emulator.put_object(node)
    client = api(admin)
    registration = {"name": "gpu-east", "kubeconfig": kubeconfig_for(kube_emulator.url), "scheduler": "kueue"}
    assert client.post("/api/v1/host-clusters/", registration, format="json").status_code == 201

    nodes = Node.objects.filter(host_cluster__name="gpu-east").order_by("name")
    assert [(n.name, n.cpu_milli, n.memory_mib) for n in nodes] == [
        ("h200-1", 96_000, 1_081_344),
        ("h200-2", 95_500, 976),
    ]
    # What-if now places on the node with room for whole-GPU pods (4 cores and 32 GiB each), not the other.
    ask = {"trust_tier": "standard", "gpu_class": "h200-141gb", "guaranteed": 16}
    answer = client.post(
        "/api/v1/fleet/what-if/", {"host_cluster": "gpu-east", "quotas": [ask]}, format="json"
    )
    assert answer.status_code == 200, answer.json()
    (line,) = answer.json()["quotas"]
    assert (line["fits"], line["placeable"], line["nodes"]) == (False, 8, [{"node": "h200-1", "units": 8}])


def test_a_scheduler_the_cluster_cannot_serve_is_refused_and_nothing_is_written(api, admin, gpu_catalog):
    with start_emulator(crds=("kueue", "flux")) as em:
        response = api(admin).post(
            "/api/v1/host-clusters/",
            {"name": "gpu-west", "kubeconfig": kubeconfig_for(em.url), "scheduler": "kai"},
            format="json",
        )
    assert response.status_code == 400
    assert "KAI Scheduler is not installed" in response.json()["errors"]["scheduler"][0]
    assert not HostCluster.objects.filter(name="gpu-west").exists()


def test_an_unreachable_cluster_or_a_broken_kubeconfig_is_a_clear_error(api, admin, gpu_catalog):
    client = api(admin)
    unreachable = client.post(
        "/api/v1/host-clusters/",
        {"name": "gone", "kubeconfig": kubeconfig_for("http://127.0.0.1:1"), "scheduler": "kueue"},
        format="json",
    )
    assert unreachable.status_code == 400
    assert "could not be read" in unreachable.json()["detail"]
    broken = client.post(
        "/api/v1/host-clusters/",
        {"name": "gone", "kubeconfig": "clusters: [", "scheduler": "kueue"},
        format="json",
    )
    assert broken.status_code == 400
    assert "not valid YAML" in broken.json()["errors"]["kubeconfig"][0]
    assert not HostCluster.objects.exists()


def test_only_platform_administrators_register_host_clusters(kube_emulator, api, make_user, gpu_catalog):
    response = api(make_user("alice")).post(
        "/api/v1/host-clusters/",
        {"name": "mine", "kubeconfig": kubeconfig_for(kube_emulator.url), "scheduler": "kueue"},
        format="json",
    )
    assert response.status_code == 403


def test_a_tenant_runs_on_the_cluster_from_creation_to_deletion(host, kube_emulator, api, admin, make_user):
    client = api(admin)
    kube_emulator.put_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
    kube_emulator.put_object(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "theirs", "namespace": "default"}}
    )
    assert (
        client.post(
            "/api/v1/tenants/", {"slug": "vision", "host_cluster": "gpu-east"}, format="json"
        ).status_code
        == 201
    )
    client.put("/api/v1/tenants/vision/quotas/h200-141gb/", {"guaranteed": 8, "burst": 4}, format="json")
    client.put("/api/v1/tenants/vision/quotas/h200-141gb.mig-1g.18gb/", {"guaranteed": 7}, format="json")

    reconcile.reconcile_host_cluster(host)
    assert client.get("/api/v1/tenants/vision/").json()["state"] == "provisioning"
    assert kube_emulator.get_object("v1", "Namespace", "tenant-vision") is not None
    quota = kube_emulator.get_object("v1", "ResourceQuota", "gpucloud-gpu-quota", "tenant-vision")
    assert quota["spec"]["hard"]["requests.nvidia.com/gpu"] == "12"  # guaranteed + burst
    assert quota["spec"]["hard"]["requests.nvidia.com/mig-1g.18gb"] == "7"
    assert kube_emulator.get_object(
        "networking.k8s.io/v1", "NetworkPolicy", "gpucloud-deny-other-tenants", "tenant-vision"
    )
    assert kube_emulator.get_object("helm.toolkit.fluxcd.io/v2", "HelmRelease", "vision", "tenant-vision")
    queue = kube_emulator.get_object(KUEUE, "ClusterQueue", "tenant-vision")
    flavors = {f["name"]: f["resources"] for g in queue["spec"]["resourceGroups"] for f in g["flavors"]}
    gpu = next(r for rs in flavors.values() for r in rs if r["name"] == "nvidia.com/gpu")
    assert (gpu["nominalQuota"], gpu["borrowingLimit"]) == ("8", "4")
    assert kube_emulator.objects_of(KUEUE, "LocalQueue")
    assert kube_emulator.objects_of(KUEUE, "ResourceFlavor")

    kube_emulator.make_vcluster_ready("tenant-vision", "vision")
    reconcile.reconcile_host_cluster(host)
    tenant = client.get("/api/v1/tenants/vision/").json()
    assert tenant["state"] == "ready"
    assert tenant["cluster"]["endpoint"] == "https://vision.gpu-east.gpucloud.internal"

    writes_before = kube_emulator.writes
    reconcile.reconcile_host_cluster(host)
    assert kube_emulator.writes == writes_before  # an unchanged tenant costs no writes

    assert client.delete("/api/v1/tenants/vision/").status_code == 202
    reconcile.reconcile_host_cluster(host)
    kube_emulator.finish_namespace_deletions()
    reconcile.reconcile_host_cluster(host)
    assert client.get("/api/v1/tenants/vision/").json()["state"] == "deleted"
    assert kube_emulator.get_object(KUEUE, "ClusterQueue", "tenant-vision") is None
    assert kube_emulator.get_object("v1", "ConfigMap", "theirs", "default") is not None


def test_the_kubeconfig_goes_to_members_only_and_every_download_is_audited(
    host, kube_emulator, api, admin, make_user
):
    client = api(admin)
    client.post("/api/v1/tenants/", {"slug": "vision", "host_cluster": "gpu-east"}, format="json")
    make_user("alice"), make_user("charlie")
    client.post("/api/v1/tenants/vision/members/", {"username": "alice", "role": "member"}, format="json")
    reconcile.reconcile_host_cluster(host)
    vcluster = start_virtual_cluster()  # the tenant's own API, which issues alice's token
    kube_emulator.make_vcluster_ready(
        "tenant-vision", "vision", server=vcluster.url, token=VCLUSTER_ADMIN_TOKEN
    )
    reconcile.reconcile_host_cluster(host)

    from django.contrib.auth.models import User

    with vcluster:
        response = api(User.objects.get(username="alice")).get("/api/v1/tenants/vision/kubeconfig/")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/yaml"
    (cluster,) = yaml.safe_load(response.content)["clusters"]
    assert cluster["cluster"]["server"] == "https://vision.gpu-east.gpucloud.internal"
    assert (
        api(User.objects.get(username="charlie")).get("/api/v1/tenants/vision/kubeconfig/").status_code == 404
    )
    event = AuditEvent.objects.get(action="kubeconfig.download")
    assert event.actor.username == "alice"
    assert event.tenant.slug == "vision"


def test_a_forbidden_answer_is_a_permanent_error_shown_on_the_tenant(api, admin, gpu_catalog):
    with start_emulator(
        crds=("kueue", "flux"), faults=Faults(forbidden={"/api/v1/namespaces/tenant-vision"})
    ) as em:
        em.put_object(h200_node("h200-1"))
        client = api(admin)
        client.post(
            "/api/v1/host-clusters/",
            {"name": "east", "kubeconfig": kubeconfig_for(em.url), "scheduler": "kueue"},
            format="json",
        )
        client.post("/api/v1/tenants/", {"slug": "vision", "host_cluster": "east"}, format="json")
        reconcile.reconcile_host_cluster(HostCluster.objects.get(name="east"))

    tenant = client.get("/api/v1/tenants/vision/").json()
    assert tenant["state"] == "failed"
    assert "forbidden" in tenant["state_reason"]
    assert "forbidden" in tenant["cluster"]["message"]
    assert Tenant.objects.get(slug="vision").cluster.state == "failed"


def test_an_unreachable_host_cluster_is_visible_and_retried(host, kube_emulator, make_tenant, api, admin):
    from gpucloud.kube.errors import TemporaryDriverError

    make_tenant("vision", host_cluster=host)
    kube_emulator.stop()
    with pytest.raises(TemporaryDriverError):
        reconcile.reconcile_host_cluster(host)
    body = api(admin).get("/api/v1/host-clusters/gpu-east/").json()
    assert body["state"] == "unreachable"
    assert body["status_message"]
    assert Tenant.objects.get(slug="vision").state == "pending"


def test_a_kai_host_cluster_gets_kai_queues_instead_of_kueue_objects(kube_emulator, api, admin, gpu_catalog):
    kube_emulator.put_object(h200_node("h200-1"))
    client = api(admin)
    registered = client.post(
        "/api/v1/host-clusters/",
        {"name": "kai-east", "kubeconfig": kubeconfig_for(kube_emulator.url), "scheduler": "kai"},
        format="json",
    )
    assert registered.status_code == 201, registered.json()
    client.post("/api/v1/tenants/", {"slug": "vision", "host_cluster": "kai-east"}, format="json")
    client.put("/api/v1/tenants/vision/quotas/h200-141gb/", {"guaranteed": 4}, format="json")

    reconcile.reconcile_host_cluster(HostCluster.objects.get(name="kai-east"))

    queues = {q["metadata"]["name"]: q for q in kube_emulator.objects_of("scheduling.run.ai/v2", "Queue")}
    leaf = next(q for q in queues.values() if q["spec"].get("parentQueue"))
    assert leaf["spec"]["parentQueue"] in queues
    assert not kube_emulator.objects_of(KUEUE, "ClusterQueue")


def test_changing_a_quota_through_the_api_rewrites_only_the_objects_it_affects(
    host, kube_emulator, api, admin
):
    client = api(admin)
    client.post("/api/v1/tenants/", {"slug": "vision", "host_cluster": "gpu-east"}, format="json")
    client.put("/api/v1/tenants/vision/quotas/h200-141gb/", {"guaranteed": 4}, format="json")
    reconcile.reconcile_host_cluster(host)
    writes = kube_emulator.writes

    client.put("/api/v1/tenants/vision/quotas/h200-141gb/", {"guaranteed": 6}, format="json")
    outcome = reconcile.reconcile_host_cluster(host)

    # the ClusterQueue and the namespace's ResourceQuota carry the number; nothing else changes
    assert outcome.result.writes == kube_emulator.writes - writes == 2
    queue = kube_emulator.get_object(KUEUE, "ClusterQueue", "tenant-vision")
    assert queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] == "6"


def test_registering_a_taken_host_cluster_name_is_a_409(api, admin, demo_fleet):
    body = {"name": "demo", "kubeconfig": "apiVersion: v1", "scheduler": "kueue"}
    response = api(admin).post("/api/v1/host-clusters/", body, format="json")
    assert response.status_code == 409
    assert response.json()["errors"] == {"name": ["already taken"]}
