"""Issue 27 item 4 through the API: a host cluster is updated, cordoned, drained and deleted.

`host` is the Kubernetes host cluster `gpu-east` (two 8 × H200 nodes) on the API stand-in; the simulated demo
fleet (`demo`, 64 × H200 and 40 × A100) is the other host cluster tenants can move to.
"""

from __future__ import annotations

import io
from typing import Any

import pytest
import yaml
from django.core.management import CommandError, call_command

from clusters.models import ObservedWorkload
from clusters.reconcile import tenants as reconcile
from clusters.tests.conftest import h200_node, kubeconfig_for
from core.models import AuditEvent
from fleet.models import HostCluster, Node
from gpucloud import crypto
from tenants.models import Tenant, TenantCluster
from tests.kube_emulator import start_emulator

URL = "/api/v1/host-clusters/gpu-east/"
KUEUE = "kueue.x-k8s.io/v1beta2"


@pytest.fixture
def east(host: HostCluster, demo_fleet: HostCluster) -> HostCluster:
    return host


def rotated(url: str, token: str = "rotated-token") -> str:
    document = yaml.safe_load(kubeconfig_for(url))
    document["users"][0]["user"]["token"] = token
    return yaml.safe_dump(document)


def tenant_on(client: Any, slug: str, host_cluster: str, guaranteed: int = 0) -> Tenant:
    created = client.post("/api/v1/tenants/", {"slug": slug, "host_cluster": host_cluster}, format="json")
    assert created.status_code == 201, created.json()
    if guaranteed:
        quota = {"guaranteed": guaranteed}
        answer = client.put(f"/api/v1/tenants/{slug}/quotas/h200-141gb/", quota, format="json")
        assert answer.status_code in (200, 201), answer.json()
    return Tenant.objects.get(slug=slug)


# --------------------------------------------------------------------------------------------- update


def test_a_rotated_kubeconfig_is_checked_against_the_cluster_stored_encrypted_and_audited(
    east, kube_emulator, api, admin
):
    before = east.kubeconfig_ciphertext
    response = api(admin).patch(URL, {"kubeconfig": rotated(kube_emulator.url)}, format="json")

    assert response.status_code == 200, response.json()
    assert "kubeconfig" not in response.json()
    east.refresh_from_db()
    assert east.kubeconfig_ciphertext != before
    assert "rotated-token" in crypto.decrypt(east.kubeconfig_ciphertext)
    assert "rotated-token" not in east.kubeconfig_ciphertext
    event = AuditEvent.objects.get(action="host_cluster.update")
    assert event.before["kubeconfig"] != event.after["kubeconfig"]
    assert "rotated-token" not in str(event.after)


def test_a_kubeconfig_of_another_cluster_is_refused_and_the_old_one_kept(east, api, admin):
    before = east.kubeconfig_ciphertext
    with start_emulator(crds=("kueue", "flux")) as other:
        other.put_object(h200_node("elsewhere-1"))
        response = api(admin).patch(URL, {"kubeconfig": kubeconfig_for(other.url)}, format="json")

    assert response.status_code == 400
    assert "another cluster" in response.json()["errors"]["kubeconfig"][0]
    east.refresh_from_db()
    assert east.kubeconfig_ciphertext == before
    assert not AuditEvent.objects.filter(action="host_cluster.update").exists()


def test_a_kubeconfig_that_runs_a_command_or_does_not_answer_is_refused(east, api, admin):
    document = yaml.safe_load(kubeconfig_for("http://127.0.0.1:1"))
    unreachable = api(admin).patch(URL, {"kubeconfig": yaml.safe_dump(document)}, format="json")
    assert unreachable.status_code == 400
    assert "could not be read" in unreachable.json()["detail"]
    document["users"][0]["user"] = {"exec": {"command": "cat", "args": ["/etc/passwd"]}}
    runs = api(admin).patch(URL, {"kubeconfig": yaml.safe_dump(document)}, format="json")
    assert runs.status_code == 422
    assert "kubeconfig.users[0].user.exec" in runs.json()["errors"]


def test_the_scheduler_changes_only_without_tenants_and_only_to_one_the_cluster_serves(east, api, admin):
    client = api(admin)
    tenant_on(client, "vision", "gpu-east")
    refused = client.patch(URL, {"scheduler": "kai"}, format="json")
    assert refused.status_code == 409
    assert "vision" in refused.json()["detail"]
    assert HostCluster.objects.get(pk=east.pk).scheduler == "kueue"

    Tenant.objects.filter(slug="vision").update(state=Tenant.State.DELETED)
    changed = client.patch(URL, {"scheduler": "kai"}, format="json")
    assert changed.status_code == 200, changed.json()
    assert changed.json()["scheduler"] == "kai"


def test_a_watched_namespace_must_be_a_name_and_serve_the_tenant_resources(east, api, admin):
    client = api(admin)
    bad = client.patch(URL, {"watch_tenants": "Not A Namespace"}, format="json")
    assert bad.status_code == 400
    assert "is not a namespace name" in bad.json()["errors"]["watch_tenants"][0]
    without_crds = client.patch(URL, {"watch_tenants": "tenants"}, format="json")
    assert without_crds.status_code == 400
    assert "does not serve Tenant custom resources" in without_crds.json()["errors"]["watch_tenants"][0]
    assert HostCluster.objects.get(pk=east.pk).tenants_namespace == ""


def test_a_simulated_host_cluster_changes_its_region_but_has_no_kubeconfig_to_rotate(east, api, admin):
    client = api(admin)
    region = client.patch("/api/v1/host-clusters/demo/", {"region": "eu-west"}, format="json")
    assert (region.status_code, region.json()["region"]) == (200, "eu-west")
    rotate = client.patch("/api/v1/host-clusters/demo/", {"kubeconfig": "apiVersion: v1"}, format="json")
    assert rotate.status_code == 400
    assert "simulated" in rotate.json()["errors"]["driver"][0]


def test_only_platform_administrators_change_cordon_drain_or_delete_host_clusters(east, api, make_user):
    client = api(make_user("alice"))
    assert client.patch(URL, {"region": "eu"}, format="json").status_code == 403
    assert client.post(URL + "cordon/", {}, format="json").status_code == 403
    assert client.post(URL + "uncordon/", {}, format="json").status_code == 403
    assert client.post(URL + "drain/", {}, format="json").status_code == 403
    assert client.delete(URL).status_code == 403
    assert HostCluster.objects.filter(pk=east.pk, cordoned_at=None).exists()


# --------------------------------------------------------------------------------------------- cordon


def test_a_cordoned_host_cluster_takes_no_new_tenant_until_uncordoned(east, api, admin):
    client = api(admin)
    cordoned = client.post(URL + "cordon/", {"reason": "hardware refresh"}, format="json")
    assert cordoned.status_code == 200
    assert (cordoned.json()["cordoned"], cordoned.json()["cordon_reason"]) == (True, "hardware refresh")

    named = client.post("/api/v1/tenants/", {"slug": "vision", "host_cluster": "gpu-east"}, format="json")
    assert named.status_code == 409
    assert "cordoned" in named.json()["detail"]
    picked = client.post("/api/v1/tenants/", {"slug": "nlp"}, format="json")
    assert picked.status_code == 201
    assert TenantCluster.objects.get(tenant__slug="nlp").host_cluster.name == "demo"

    assert client.post(URL + "uncordon/", {}, format="json").json()["cordoned"] is False
    again = client.post("/api/v1/tenants/", {"slug": "vision", "host_cluster": "gpu-east"}, format="json")
    assert again.status_code == 201
    actions = list(AuditEvent.objects.filter(object_id=east.public_id).values_list("action", flat=True))
    assert "host_cluster.cordon" in actions
    assert "host_cluster.uncordon" in actions


# --------------------------------------------------------------------------------------------- drain


def test_a_drain_moves_tenants_that_fit_elsewhere_and_says_why_it_keeps_the_others(east, api, admin):
    client = api(admin)
    moving = tenant_on(client, "vision", "gpu-east", guaranteed=8)
    ready = tenant_on(client, "speech", "gpu-east")
    Tenant.objects.filter(pk=ready.pk).update(state=Tenant.State.READY)
    busy = tenant_on(client, "nlp", "gpu-east")
    ObservedWorkload.objects.create(tenant=busy, name="train-1", state="admitted", gpus=8)

    response = client.post(URL + "drain/", {}, format="json")

    assert response.status_code == 200, response.json()
    report = response.json()
    assert report["moved"] == {"vision": "demo"}
    assert "1 workloads run there (train-1)" in report["refused"]["nlp"]
    assert "recreate" in report["refused"]["speech"]
    assert TenantCluster.objects.get(tenant=moving).host_cluster.name == "demo"
    assert HostCluster.objects.get(pk=east.pk).cordoned
    move = AuditEvent.objects.get(action="tenant.move")
    assert (move.before["host_cluster"], move.after["host_cluster"]) == ("gpu-east", "demo")
    assert AuditEvent.objects.get(action="host_cluster.drain").after["moved"] == {"vision": "demo"}

    with_recreate = client.post(URL + "drain/", {"recreate": True}, format="json").json()
    assert with_recreate["moved"] == {"speech": "demo"}
    assert Tenant.objects.get(pk=ready.pk).state == Tenant.State.PROVISIONING


def test_a_tenant_whose_guarantees_no_other_host_cluster_admits_stays_with_the_reason(east, api, admin):
    client = api(admin)
    tenant_on(client, "vision", "gpu-east", guaranteed=16)
    tenant_on(client, "big", "demo", guaranteed=60)  # demo has 64 H200s: 4 left

    report = client.post(URL + "drain/", {}, format="json").json()

    assert report["moved"] == {}
    assert "demo: h200-141gb: asked to guarantee 16" in report["refused"]["vision"]
    assert "at most 4 can be guaranteed there" in report["refused"]["vision"]
    assert TenantCluster.objects.get(tenant__slug="vision").host_cluster == east


def test_a_dry_drain_reports_and_changes_nothing(east, api, admin):
    client = api(admin)
    tenant_on(client, "vision", "gpu-east", guaranteed=8)

    report = client.post(URL + "drain/", {"dry_run": True}, format="json").json()

    assert (report["moved"], report["dry_run"]) == ({"vision": "demo"}, True)
    assert TenantCluster.objects.get(tenant__slug="vision").host_cluster == east
    assert not HostCluster.objects.get(pk=east.pk).cordoned
    assert not AuditEvent.objects.filter(action__in=["tenant.move", "host_cluster.drain"]).exists()


def test_a_drain_to_an_unknown_or_the_same_host_cluster_is_a_clear_400(east, api, admin):
    client = api(admin)
    unknown = client.post(URL + "drain/", {"target": "nowhere"}, format="json")
    assert unknown.status_code == 400
    assert "there is no host cluster 'nowhere'" in unknown.json()["errors"]["target"][0]
    same = client.post(URL + "drain/", {"target": "gpu-east"}, format="json")
    assert same.status_code == 400
    assert "itself" in same.json()["errors"]["target"][0]


# --------------------------------------------------------------------------------------------- delete


def test_a_host_cluster_with_tenants_is_not_deleted_and_an_empty_one_is(east, api, admin):
    client = api(admin)
    tenant_on(client, "vision", "gpu-east")
    refused = client.delete(URL)
    assert refused.status_code == 409
    assert refused.json()["errors"]["tenants"] == ["vision"]
    assert HostCluster.objects.filter(pk=east.pk).exists()

    assert client.post(URL + "drain/", {}, format="json").json()["moved"] == {"vision": "demo"}
    assert client.delete(URL).status_code == 204

    assert not HostCluster.objects.filter(name="gpu-east").exists()
    assert not Node.objects.filter(name="h200-1").exists()
    event = AuditEvent.objects.get(action="host_cluster.delete")
    assert (event.object_id, event.before["nodes"]) == (east.public_id, 2)
    assert client.get(URL).status_code == 404


def test_a_host_cluster_that_deleted_tenants_lived_on_is_kept_for_their_history(east, api, admin):
    client = api(admin)
    gone = tenant_on(client, "vision", "gpu-east")
    Tenant.objects.filter(pk=gone.pk).update(state=Tenant.State.DELETED)

    refused = client.delete(URL)

    assert refused.status_code == 409
    assert "history" in refused.json()["detail"]
    assert "tenant cluster" in refused.json()["errors"]["history"][0]
    assert HostCluster.objects.filter(pk=east.pk).exists()


# --------------------------------------------------------------------------------------------- manage.py


def test_the_console_cordons_drains_and_deletes_with_the_same_rules(east, api, admin):
    tenant_on(api(admin), "vision", "gpu-east", guaranteed=8)
    out = io.StringIO()

    call_command("host_cluster", "cordon", "gpu-east", "--reason", "retiring", stdout=out)
    call_command("host_cluster", "drain", "gpu-east", "--dry-run", stdout=out)
    with pytest.raises(CommandError, match="still runs tenants vision"):
        call_command("host_cluster", "delete", "gpu-east")
    call_command("host_cluster", "drain", "gpu-east", stdout=out)
    call_command("host_cluster", "delete", "gpu-east", stdout=out)

    assert out.getvalue().splitlines() == [
        "host cluster gpu-east is cordoned: it takes no new tenants",
        "would move vision to demo",
        "host cluster gpu-east: empty (dry run)",
        "moved vision to demo",
        "host cluster gpu-east: empty",
        "host cluster gpu-east deleted",
    ]
    actors = set(
        AuditEvent.objects.filter(action__startswith="host_cluster.").values_list("actor_label", flat=True)
    )
    assert actors >= {"console:host_cluster"}
    with pytest.raises(CommandError, match="there is no host cluster 'gpu-east'"):
        call_command("host_cluster", "uncordon", "gpu-east")


def test_a_moved_tenant_is_pruned_from_the_source_and_made_on_the_target(east, kube_emulator, api, admin):
    client = api(admin)
    tenant = tenant_on(client, "vision", "gpu-east", guaranteed=8)
    reconcile.reconcile_host_cluster(east)
    assert kube_emulator.get_object("v1", "Namespace", "tenant-vision") is not None
    assert Tenant.objects.get(pk=tenant.pk).state == Tenant.State.PROVISIONING  # its vCluster is not ready

    assert client.post(URL + "drain/", {}, format="json").json()["moved"] == {"vision": "demo"}
    reconcile.reconcile_host_cluster(HostCluster.objects.get(pk=east.pk))  # the source's complete pass
    kube_emulator.finish_namespace_deletions()
    reconcile.reconcile_host_cluster(HostCluster.objects.get(name="demo"))

    assert kube_emulator.get_object("v1", "Namespace", "tenant-vision") is None
    assert kube_emulator.get_object(KUEUE, "ClusterQueue", "tenant-vision") is None
    cluster = TenantCluster.objects.get(tenant=tenant)
    assert cluster.host_cluster.name == "demo"
    assert cluster.state in (TenantCluster.State.PROVISIONING, TenantCluster.State.READY)
