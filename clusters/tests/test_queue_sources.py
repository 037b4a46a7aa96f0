"""Where a tenant's waiting workloads stand, by each scheduler's word: Kueue's pending Workloads with their
place from Kueue's visibility API (or gpucloud's own order, and a conformance line, where it is not served),
KAI's PodGroups not scheduled yet with the priority of their PriorityClass. The cluster is the API stand-in
(tests/kube_emulator.py), which computes Kueue's positions from the Workloads it stores."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command

from clusters.reconcile import tenants as reconcile
from clusters.tests.conftest import h200_node, kubeconfig_for
from clusters.tests.test_host_clusters_api import KUEUE
from clusters.tests.test_kubernetes_driver import kueue_workload
from fleet.models import HostCluster, PendingWorkload
from tenants.models import Membership, Tenant

VISIBILITY = "/apis/visibility.kueue.x-k8s.io"
KAI = "scheduling.run.ai/v2alpha2"


def waiting(
    name: str, *, gpus: str = "1", count: int = 1, priority: int = 0, evicted_at: str = "", message: str = ""
) -> dict[str, Any]:
    """A Kueue Workload waiting for quota, in Kueue's words; `evicted_at`: evicted then (and requeued)."""
    obj = kueue_workload(name, "tenant-vision", gpus={"nvidia.com/gpu": gpus}, count=count)
    obj["spec"]["priority"] = priority
    conditions = [
        {
            "type": "QuotaReserved",
            "status": "False",
            "reason": "Pending",
            "message": message or f"couldn't assign flavors to pod set main: insufficient quota for {name}",
            "lastTransitionTime": "2026-05-01T10:00:00Z",
        }
    ]
    if evicted_at:
        conditions.append(
            {
                "type": "Evicted",
                "status": "True",
                "reason": "PodsReadyTimeout",
                "message": "Exceeded the PodsReady timeout",
                "lastTransitionTime": evicted_at,
            }
        )
    obj["status"] = {"conditions": conditions}
    return obj


def rows(source: str = "kueue") -> list[tuple[Any, ...]]:
    return list(
        PendingWorkload.objects.filter(source=source)
        .order_by("name")
        .values_list("name", "position", "priority", "pods", "gpus", "gpu_class", "message")
    )


def capability(name: str) -> dict[str, Any]:
    return next(c for c in HostCluster.objects.get(name="gpu-east").conformance if c["name"] == name)


@pytest.fixture
def vision(host, api, admin):
    client = api(admin)
    client.post("/api/v1/tenants/", {"slug": "vision", "host_cluster": "gpu-east"}, format="json")
    client.put("/api/v1/tenants/vision/quotas/h200-141gb/", {"guaranteed": 8}, format="json")
    reconcile.reconcile_host_cluster(host)
    return Tenant.objects.get(slug="vision")


def three_waiting(kube_emulator) -> None:
    """Created in name order; `a-requeued` was evicted after the others were created, so Kueue puts it
    last, while by creation and name it would be first of the two of priority 0."""
    later = (datetime.now(UTC) + timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%SZ")
    kube_emulator.put_object(waiting("a-requeued", gpus="2", count=2, evicted_at=later))
    kube_emulator.put_object(waiting("b-fresh", gpus="1"))
    kube_emulator.put_object(waiting("c-urgent", gpus="4", priority=100))


def test_the_queue_follows_kueues_positions_with_its_priority_pods_and_words(
    host, vision, kube_emulator, api, admin
):
    kube_emulator.serve_kueue_visibility()
    three_waiting(kube_emulator)

    reconcile.reconcile_host_cluster(host)

    assert rows() == [
        (
            "a-requeued",
            3,
            0,
            2,
            4,
            "h200-141gb",
            "couldn't assign flavors to pod set main: insufficient quota for a-requeued",
        ),
        (
            "b-fresh",
            2,
            0,
            1,
            1,
            "h200-141gb",
            "couldn't assign flavors to pod set main: insufficient quota for b-fresh",
        ),
        (
            "c-urgent",
            1,
            100,
            1,
            4,
            "h200-141gb",
            "couldn't assign flavors to pod set main: insufficient quota for c-urgent",
        ),
    ]
    assert capability("kueue_visibility")["found"]
    body = api(admin).get("/api/v1/tenants/vision/queue/").json()["results"]
    assert [(w["name"], w["position"], w["reported_by"]) for w in body] == [
        ("c-urgent", 1, "kueue"),
        ("b-fresh", 2, "kueue"),
        ("a-requeued", 3, "kueue"),
    ]
    assert body[2]["reason"].startswith("position 3 in Kueue's queue: ")
    assert body[2]["scheduler_message"].endswith("insufficient quota for a-requeued")
    assert (body[0]["priority"], body[2]["pods"]) == (100, 2)

    # Unchanged: no database writes. Kueue admits the urgent one: the others move up, rewritten.
    assert reconcile.reconcile_host_cluster(host).db_writes == 0
    kube_emulator.edit_object(
        KUEUE,
        "Workload",
        "c-urgent",
        "tenant-vision",
        {
            "status": {
                "conditions": [
                    {"type": c, "status": "True", "reason": c} for c in ("QuotaReserved", "Admitted")
                ]
            }
        },
    )
    reconcile.reconcile_host_cluster(host)
    assert [(name, position) for name, position, *_ in rows()] == [("a-requeued", 2), ("b-fresh", 1)]


def test_an_idle_pass_asks_the_visibility_api_nothing(host, vision, kube_emulator):
    kube_emulator.serve_kueue_visibility()
    kube_emulator.put_object(
        kueue_workload(
            "runs",
            "tenant-vision",
            gpus={"nvidia.com/gpu": "1"},
            flavor="h200-141gb",
            conditions=("QuotaReserved", "Admitted"),
        )
    )

    reconcile.reconcile_host_cluster(host)

    assert not [path for _, path, _ in kube_emulator.log if path.startswith(VISIBILITY)]
    assert not PendingWorkload.objects.exists()


def test_the_version_the_server_serves_is_the_one_asked(host, vision, kube_emulator):
    kube_emulator.serve_kueue_visibility("v1beta1")
    three_waiting(kube_emulator)

    reconcile.reconcile_host_cluster(host)

    asked = {path for _, path, _ in kube_emulator.log if path.endswith("/pendingworkloads")}
    assert asked == {f"{VISIBILITY}/v1beta1/namespaces/tenant-vision/localqueues/default/pendingworkloads"}
    assert [(name, position) for name, position, *_ in rows()] == [
        ("a-requeued", 3),
        ("b-fresh", 2),
        ("c-urgent", 1),
    ]


def test_without_the_visibility_api_the_queue_keeps_its_own_order_and_conformance_says_how_to_enable_it(
    host, vision, kube_emulator, api, admin
):
    three_waiting(kube_emulator)

    outcome = reconcile.reconcile_host_cluster(host)

    assert outcome.result.errors == {}
    assert {position for _, position, *_ in rows()} == {None}
    cap = capability("kueue_visibility")
    assert not cap["found"]
    assert "gpucloud's own order" in cap["without"]
    assert "VisibilityOnDemand" in cap["how"]
    body = api(admin).get("/api/v1/tenants/vision/queue/").json()["results"]
    # Priority, then creation, then name: the requeued one goes before the fresh one here.
    assert [w["name"] for w in body] == ["c-urgent", "a-requeued", "b-fresh"]
    assert not body[1]["reason"].startswith("position")


def test_a_visibility_api_that_refuses_gpucloud_leaves_positions_unknown(host, vision, kube_emulator):
    kube_emulator.serve_kueue_visibility()
    kube_emulator.faults.forbidden.add(f"{VISIBILITY}/v1beta2/namespaces/")
    three_waiting(kube_emulator)

    outcome = reconcile.reconcile_host_cluster(host)

    assert outcome.result.errors == {}
    assert len(rows()) == 3
    assert {position for _, position, *_ in rows()} == {None}
    assert 403 in {status for _, path, status in kube_emulator.log if path.startswith(VISIBILITY)}
    cap = capability("kueue_visibility")
    assert not cap["found"]
    assert "refused to gpucloud" in cap["version"]
    assert "localqueues/pendingworkloads" in cap["how"]


# --- KAI -----------------------------------------------------------------------------------------------


@pytest.fixture
def kai_host(kube_emulator, api, admin, gpu_catalog) -> HostCluster:
    kube_emulator.put_object(h200_node("h200-1"))
    client = api(admin)
    registered = client.post(
        "/api/v1/host-clusters/",
        {"name": "kai-east", "kubeconfig": kubeconfig_for(kube_emulator.url), "scheduler": "kai"},
        format="json",
    )
    assert registered.status_code == 201, registered.json()
    client.post("/api/v1/tenants/", {"slug": "vision", "host_cluster": "kai-east"}, format="json")
    client.put("/api/v1/tenants/vision/quotas/h200-141gb/", {"guaranteed": 8}, format="json")
    host = HostCluster.objects.get(name="kai-east")
    reconcile.reconcile_host_cluster(host)
    for name, value, default in (("train-high", 1000, False), ("normal", 10, True)):
        kube_emulator.put_object(
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": name},
                "value": value,
                "globalDefault": default,
            }
        )
    return host


def pod_group(name: str, min_member: int, priority_class: str = "", **status: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"minMember": min_member, "queue": "tenant-vision"}
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {
        "apiVersion": KAI,
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "tenant-vision"},
        "spec": spec,
        "status": status,
    }


def pod(name: str, group: str, gpus: int, node: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": "kai-scheduler",
        "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}],
    }
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "tenant-vision", "annotations": {"pod-group-name": group}},
        "spec": spec,
        "status": {"phase": "Running" if node else "Pending"},
    }


UNSCHEDULABLE = {
    "schedulingConditions": [
        {
            "type": "UnschedulableOnNodePool",
            "nodePool": "default",
            "reason": "Unschedulable",
            "message": "old words",
            "transitionID": "1",
            "status": "True",
        },
        {
            "type": "UnschedulableOnNodePool",
            "nodePool": "default",
            "reason": "Unschedulable",
            "message": "",
            "reasons": [
                {"reason": "OverLimit", "message": "queue tenant-vision would exceed its GPU limit of 8"}
            ],
            "transitionID": "2",
            "status": "True",
        },
    ]
}


def test_kai_pod_groups_that_wait_become_the_tenants_queue_until_they_are_scheduled(
    kai_host, kube_emulator, api, admin, client, make_user
):
    put = kube_emulator.put_object
    put(pod_group("train", 2, "train-high", **UNSCHEDULABLE))
    put(pod("train-0", "train", 4))
    put(pod("train-1", "train", 4))
    put(pod_group("eval", 3))  # one of its three pods exists so far; nothing said yet
    put(pod("eval-0", "eval", 1))
    put(pod_group("serve", 1, resourcesStatus={"allocated": {"nvidia.com/gpu": "2"}}))
    put(pod("serve-0", "serve", 2, node="h200-1"))
    put(pod_group("done", 1))
    finished = pod("done-0", "done", 1)
    finished["status"]["phase"] = "Succeeded"
    put(finished)

    reconcile.reconcile_host_cluster(kai_host)

    assert rows("kai") == [
        ("eval", None, 10, 3, 3, "h200-141gb", ""),
        ("train", None, 1000, 2, 8, "h200-141gb", "queue tenant-vision would exceed its GPU limit of 8"),
    ]
    body = api(admin).get("/api/v1/tenants/vision/queue/").json()["results"]
    assert [(w["name"], w["reported_by"], w["queue"]) for w in body] == [
        ("train", "kai", "tenant-vision"),
        ("eval", "kai", "tenant-vision"),
    ]
    member = make_user("mira")
    Membership.objects.create(tenant=Tenant.objects.get(slug="vision"), user=member, role="member")
    client.force_login(member)
    page = client.get("/tenants/vision/queue/").content.decode()
    assert "KAI says: queue tenant-vision would exceed its GPU limit of 8" in page
    assert "in 2 pods" in page
    lines = StringIO()
    call_command("tenant_queue", "vision", stdout=lines)
    assert "1. train  8 × h200-141gb in 2 pods  priority 1000" in lines.getvalue()
    assert "[KAI says: queue tenant-vision would exceed its GPU limit of 8]" in lines.getvalue()

    assert reconcile.reconcile_host_cluster(kai_host).db_writes == 0
    for name in ("train-0", "train-1"):
        kube_emulator.edit_object("v1", "Pod", name, "tenant-vision", {"spec": {"nodeName": "h200-1"}})
    reconcile.reconcile_host_cluster(kai_host)
    assert [name for name, *_ in rows("kai")] == ["eval"]


def test_an_idle_kai_pass_lists_no_pods_and_no_priority_classes(kai_host, kube_emulator):
    kube_emulator.put_object(pod_group("serve", 1, resourcesStatus={"allocated": {"nvidia.com/gpu": "2"}}))
    kube_emulator.put_object(pod("serve-0", "serve", 2, node="h200-1"))
    before = len(kube_emulator.log)

    reconcile.reconcile_host_cluster(kai_host)

    paths = [path for _, path, _ in kube_emulator.log[before:]]
    # (Other passes list every pod of the cluster; the queue's read is the namespace's, only when one waits.)
    assert not [p for p in paths if p.endswith("/namespaces/tenant-vision/pods") or "priorityclasses" in p]
    assert any(p.endswith("/podgroups") for p in paths)
    assert not PendingWorkload.objects.exists()


def test_the_feasibility_command_puts_the_ask_behind_the_waiting_workloads(kai_host, kube_emulator):
    kube_emulator.put_object(pod_group("train", 1, "train-high"))
    kube_emulator.put_object(pod("train-0", "train", 6))
    reconcile.reconcile_host_cluster(kai_host)
    out = StringIO()

    call_command("feasibility", "vision", "--class", "h200-141gb", "--count", "4", "--hours", "1", stdout=out)

    answer = json.loads(out.getvalue())
    assert answer["quota"]["ahead"] == 6
    assert answer["fits_now"] is False
