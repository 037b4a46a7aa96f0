"""Kueue workloads on a Kubernetes host cluster: observed once per pass, stored per tenant only when they
change, and shown on the tenant's workloads page. The cluster is the API stand-in (tests/kube_emulator.py)."""

from __future__ import annotations

from typing import Any

from clusters.models import ObservedWorkload
from clusters.reconcile import tenants as reconcile
from clusters.tests.test_host_clusters_api import KUEUE
from clusters.tests.test_kubernetes_driver import kueue_workload
from fleet.models import PendingWorkload
from tenants.models import Membership, Tenant


def rows(tenant: Tenant) -> set[tuple[Any, ...]]:
    return set(
        ObservedWorkload.objects.filter(tenant=tenant).values_list("name", "state", "gpus", "gpu_class")
    )


def test_the_reconciler_stores_each_tenants_kueue_workloads_and_rewrites_them_only_when_they_change(
    host, kube_emulator, api, admin
):
    client = api(admin)
    for slug in ("vision", "speech"):
        client.post("/api/v1/tenants/", {"slug": slug, "host_cluster": "gpu-east"}, format="json")
        client.put(f"/api/v1/tenants/{slug}/quotas/h200-141gb/", {"guaranteed": 8}, format="json")
    reconcile.reconcile_host_cluster(host)
    vision, speech = Tenant.objects.get(slug="vision"), Tenant.objects.get(slug="speech")
    assert rows(vision) == set()
    put = kube_emulator.put_object
    put(kueue_workload("job-train", "tenant-vision", gpus={"nvidia.com/gpu": "4"}, count=2))
    put(
        kueue_workload(
            "job-eval",
            "tenant-speech",
            gpus={"nvidia.com/gpu": "1"},
            flavor="h200-141gb",
            conditions=("QuotaReserved", "Admitted"),
        )
    )

    reconcile.reconcile_host_cluster(host)
    assert rows(vision) == {("job-train", "pending", 8, "h200-141gb")}
    assert rows(speech) == {("job-eval", "admitted", 1, "h200-141gb")}
    # The queue's store holds the waiting one, with its pods, for the tenant's host namespace.
    assert list(
        PendingWorkload.objects.values_list("tenant__slug", "source", "namespace", "name", "gpus")
    ) == [("vision", "kueue", "tenant-vision", "job-train", 8)]
    ids = set(ObservedWorkload.objects.values_list("pk", flat=True))

    unchanged = reconcile.reconcile_host_cluster(host)
    assert unchanged.db_writes == 0
    assert set(ObservedWorkload.objects.values_list("pk", flat=True)) == ids

    kube_emulator.edit_object(
        KUEUE,
        "Workload",
        "job-train",
        "tenant-vision",
        {
            "status": kueue_workload(
                "x",
                "tenant-vision",
                gpus={"nvidia.com/gpu": "4"},
                count=2,
                flavor="h200-141gb",
                conditions=("QuotaReserved", "Admitted"),
            )["status"]
        },
    )
    kube_emulator.remove_object(KUEUE, "Workload", "job-eval", "tenant-speech")
    changed = reconcile.reconcile_host_cluster(host)
    assert rows(vision) == {("job-train", "admitted", 8, "h200-141gb")}
    assert rows(speech) == set()
    # vision's row replaced (1 deleted, 1 written) and its waiting row deleted; speech's deleted
    assert changed.db_writes == 4
    assert not PendingWorkload.objects.exists()  # admitted: it waits no more

    client.delete("/api/v1/tenants/vision/")
    reconcile.reconcile_host_cluster(host)
    assert rows(vision) == set()  # a tenant being deleted keeps no workloads


def test_the_workloads_page_shows_what_runs_and_waits_with_gpus_class_age_and_state(
    host, kube_emulator, api, admin, client, make_user
):
    api(admin).post("/api/v1/tenants/", {"slug": "vision", "host_cluster": "gpu-east"}, format="json")
    api(admin).put("/api/v1/tenants/vision/quotas/h200-141gb/", {"guaranteed": 8}, format="json")
    reconcile.reconcile_host_cluster(host)
    put = kube_emulator.put_object
    put(
        kueue_workload(
            "job-train",
            "tenant-vision",
            gpus={"nvidia.com/gpu": "2"},
            count=4,
            flavor="h200-141gb",
            conditions=("QuotaReserved", "Admitted"),
        )
    )
    put(kueue_workload("job-sweep", "tenant-vision", gpus={"nvidia.com/gpu": "1"}, count=3))
    put(
        kueue_workload(
            "job-old",
            "tenant-vision",
            gpus={"nvidia.com/gpu": "1"},
            flavor="h200-141gb",
            conditions=("Admitted", "Finished"),
        )
    )
    reconcile.reconcile_host_cluster(host)
    member = make_user("mira")
    Membership.objects.create(tenant=Tenant.objects.get(slug="vision"), user=member, role="member")
    client.force_login(member)

    page = client.get("/tenants/vision/workloads/").content.decode()
    finished = client.get("/tenants/vision/workloads/?state=finished").content.decode()

    assert "job-train" in page
    assert "job-sweep" in page
    assert "job-old" not in page
    assert '<td class="num">8</td>' in page
    assert '<td class="num">3</td>' in page
    assert "admitted" in page
    assert "waiting" in page
    assert "h200-141gb" in page
    assert "ago)" in page
    assert "job-old" in finished
    assert "job-train" not in finished


def test_a_member_sees_the_kueue_workloads_in_the_browser(
    host, kube_emulator, api, admin, browser, make_user
):
    api(admin).post("/api/v1/tenants/", {"slug": "vision", "host_cluster": "gpu-east"}, format="json")
    api(admin).put("/api/v1/tenants/vision/quotas/h200-141gb/", {"guaranteed": 8}, format="json")
    api(admin).put("/api/v1/tenants/vision/quotas/h200-141gb.mig-1g.18gb/", {"guaranteed": 7}, format="json")
    reconcile.reconcile_host_cluster(host)
    put = kube_emulator.put_object
    put(
        kueue_workload(
            "job-llm-pretrain-4f2k9",
            "tenant-vision",
            gpus={"nvidia.com/gpu": "8"},
            count=2,
            flavor="h200-141gb",
            conditions=("QuotaReserved", "Admitted"),
        )
    )
    put(kueue_workload("job-notebook-a81xq", "tenant-vision", gpus={"nvidia.com/mig-1g.18gb": "1"}, count=3))
    reconcile.reconcile_host_cluster(host)
    member = make_user("mira")
    Membership.objects.create(tenant=Tenant.objects.get(slug="vision"), user=member, role="member")

    browser.sign_in("mira", "pw-mira")
    browser.go("/tenants/vision/workloads/")

    table = browser.page.inner_text("#kueue-workloads")
    assert "job-llm-pretrain-4f2k9" in table
    assert "16" in table
    assert "admitted" in table
    assert "job-notebook-a81xq" in table
    assert "h200-141gb.mig-1g.18gb" in table
    assert "waiting" in table
    browser.shot("workloads-kubernetes", narrow=True)
