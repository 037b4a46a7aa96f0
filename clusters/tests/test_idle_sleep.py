"""Issue 16 §5 on a Kubernetes host cluster (the stand-in): the sleep settings reach the vCluster's values,
and a tenant put to sleep for idleness lends its whole guarantee to its cohort until it wakes."""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from clusters.reconcile import tenants as reconcile
from core.audit import Actor
from core.models import AuditEvent
from tenants.models import Tenant
from tenants.services import sleep

KUEUE = "kueue.x-k8s.io/v1beta2"


def release_values(kube_emulator) -> dict[str, Any]:
    release = kube_emulator.get_object("helm.toolkit.fluxcd.io/v2", "HelmRelease", "vision", "tenant-vision")
    values: dict[str, Any] = release["spec"]["values"]
    return values


def gpu_quota(kube_emulator) -> dict[str, Any]:
    queue = kube_emulator.get_object(KUEUE, "ClusterQueue", "tenant-vision")
    resources = [r for g in queue["spec"]["resourceGroups"] for f in g["flavors"] for r in f["resources"]]
    return next(r for r in resources if r["name"] == "nvidia.com/gpu")


def test_the_tenant_sets_its_vcluster_sleep_mode_from_its_settings(host, kube_emulator, api, admin):
    client = api(admin)
    client.post("/api/v1/tenants/", {"slug": "vision", "host_cluster": "gpu-east"}, format="json")
    reconcile.reconcile_host_cluster(host)
    assert "sleep" not in release_values(kube_emulator)

    response = client.patch(
        "/api/v1/tenants/vision/", {"sleep_after_inactivity": "2h", "sleep_when_idle": True}, format="json"
    )
    assert response.status_code == 200, response.json()
    assert (response.json()["sleep_after_inactivity"], response.json()["sleep_when_idle"]) == ("2h", True)
    reconcile.reconcile_host_cluster(host)
    assert release_values(kube_emulator)["sleep"] == {"auto": {"afterInactivity": "2h"}}

    bad = client.patch("/api/v1/tenants/vision/", {"sleep_after_inactivity": "soon"}, format="json")
    assert bad.status_code == 400
    assert "sleep_after_inactivity" in bad.json()["errors"]


def test_an_idle_tenant_asleep_lends_its_guarantee_and_gets_it_back_when_woken(
    host,
    kube_emulator,
    api,
    admin,
    make_user,
):
    client = api(admin)
    client.post("/api/v1/tenants/", {"slug": "vision", "host_cluster": "gpu-east"}, format="json")
    client.put(
        "/api/v1/tenants/vision/quotas/h200-141gb/",
        {"guaranteed": 8, "burst": 0, "lendable": 2},
        format="json",
    )
    make_user("bob")
    client.post("/api/v1/tenants/vision/members/", {"username": "bob", "role": "viewer"}, format="json")
    reconcile.reconcile_host_cluster(host)
    kube_emulator.make_vcluster_ready("tenant-vision", "vision")
    reconcile.reconcile_host_cluster(host)
    assert gpu_quota(kube_emulator)["lendingLimit"] == "2"

    tenant = Tenant.objects.get(slug="vision")
    sleep.set_sleep_settings(actor=Actor.of(admin), tenant=tenant, sleep_when_idle=True)
    assert sleep.flag_idle(actor=Actor.system("idle"), tenant=tenant, since=timezone.now())
    reconcile.reconcile_host_cluster(host)
    assert "lendingLimit" not in gpu_quota(kube_emulator)  # the whole guarantee is lendable
    assert gpu_quota(kube_emulator)["nominalQuota"] == "8"  # still its own: reclaimed when it wakes
    assert release_values(kube_emulator)["sleep"] == {"auto": {"afterInactivity": "1m"}}
    assert client.get("/api/v1/tenants/vision/").json()["asleep_since"]

    from django.contrib.auth.models import User

    response = api(User.objects.get(username="bob")).post("/api/v1/tenants/vision/wake/")  # one click
    assert response.status_code == 202
    assert response.json()["asleep_since"] is None
    reconcile.reconcile_host_cluster(host)
    assert gpu_quota(kube_emulator)["lendingLimit"] == "2"
    assert "sleep" not in release_values(kube_emulator)
    assert AuditEvent.objects.get(action="tenant.wake").actor.username == "bob"
