"""Quarantine on a Kubernetes host cluster (the API stand-in through the real client), with a real Celery
worker: DCGM rounds through the ingest path adopt the GPUs' real UUIDs and take faulty GPUs out; a node
whose GPUs are all out, or whose Node Problem Detector condition is fatal, is cordoned and tainted by the
health pass the quarantine enqueues; a node back in service loses both (not a cordon someone else made)."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from billing.models import ScrapeRecord
from billing.services.ingest import ingest_round
from billing.tests.conftest import Row, exposition
from clusters.tests.conftest import kubeconfig_for
from core.models import AuditEvent
from fleet.models import Gpu, HostCluster, Node, placeholder_uuid
from health.models import HealthEvent, Quarantine
from health.node_driver import CORDONED, GPUS_OUT, TAINT_KEY
from health.node_pass import health_pass
from health.services import alerts
from tenants.capacity import gpus_by_host_and_model

pytestmark = pytest.mark.django_db(transaction=True)
H200 = "NVIDIA H200"
TAINT = {"key": TAINT_KEY, "effect": "NoSchedule"}


def gpu_node(name: str) -> dict[str, Any]:
    labels = {"nvidia.com/gpu.product": "NVIDIA-H200", "nvidia.com/gpu.count": "8"}
    ready = {
        "type": "Ready",
        "status": "True",
        "reason": "KubeletReady",
        "message": "kubelet is posting ready status",
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": {"taints": [{"key": "example.com/dedicated", "value": "ml", "effect": "NoSchedule"}]},
        "status": {"allocatable": {"nvidia.com/gpu": "8"}, "conditions": [ready]},
    }


def real_uuid(node: str, index: int) -> str:
    return f"GPU-{abs(hash((node, index))) % 10**8:08d}-0000-4000-8000-{index:012d}"


@pytest.fixture
def host(kube_emulator, api, admin, gpu_catalog) -> HostCluster:
    for name in ("h200-1", "h200-2"):
        kube_emulator.put_object(gpu_node(name))
    body = {
        "name": "gpu-east",
        "driver": "kubernetes",
        "kubeconfig": kubeconfig_for(kube_emulator.url),
        "scheduler": "kueue",
    }
    response = api(admin).post("/api/v1/host-clusters/", body, format="json")
    assert response.status_code == 201, response.json()
    return HostCluster.objects.get(name="gpu-east")


def scrape(
    host: HostCluster, t: float, faults: dict[int, int] | None = None, node: str = "h200-1"
) -> ScrapeRecord:
    """One node's dcgm-exporter round: every GPU listed, XIDs where `faults` says, through the ingest path."""
    at = T0 + timedelta(seconds=t)
    rows = [Row(real_uuid(node, i), model=H200, index=i) for i in range(8)]
    text = exposition(node, rows)
    for index, xid in (faults or {}).items():
        labels = f'gpu="{index}",UUID="{real_uuid(node, index)}",modelName="{H200}",hostname="{node}"'
        text += f"DCGM_FI_DEV_XID_ERRORS{{{labels}}} {xid}\n"
    return ingest_round(host, at, {node: text})[node]


T0 = timezone.now().replace(microsecond=0) - timedelta(minutes=10)


def node_obj(kube_emulator, name: str) -> dict[str, Any]:
    node: dict[str, Any] = kube_emulator.get_object("v1", "Node", name)
    return node


def eventually(check: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("the worker did not get there in time")
        time.sleep(0.2)


def our_taint(node: dict[str, Any]) -> dict[str, Any] | None:
    return next((t for t in node["spec"].get("taints") or [] if t["key"] == TAINT_KEY), None)


def test_dcgm_replaces_the_placeholder_uuids_of_imported_gpus(host):
    gpu = Gpu.objects.get(node__name="h200-1", index=3)
    assert gpu.uuid == placeholder_uuid(host.pk, "h200-1", 3)
    scrape(host, 0)
    gpu.refresh_from_db()
    assert gpu.uuid == real_uuid("h200-1", 3)
    assert AuditEvent.objects.filter(action="gpu.uuid", object_id=gpu.uuid).count() == 1
    scrape(host, 30)
    assert not HealthEvent.objects.exists()


def test_a_node_whose_gpus_all_fail_is_cordoned_and_tainted_by_the_worker(host, kube_emulator, celery_worker):
    scrape(host, 0)
    scrape(host, 30, faults={0: 79})
    assert Gpu.objects.get(uuid=real_uuid("h200-1", 0)).health == Gpu.Health.QUARANTINED
    eventually(
        lambda: node_obj(kube_emulator, "h200-1")["metadata"].get("annotations", {}).get(GPUS_OUT) == "0"
    )
    assert not node_obj(kube_emulator, "h200-1")["spec"].get("unschedulable")  # one GPU out: not the node

    scrape(host, 60, faults=dict.fromkeys(range(8), 79))
    assert Node.objects.get(name="h200-1").state == Node.State.QUARANTINED
    eventually(lambda: our_taint(node_obj(kube_emulator, "h200-1")) is not None)
    node = node_obj(kube_emulator, "h200-1")
    assert node["spec"]["unschedulable"] is True
    assert our_taint(node) == {**TAINT, "value": "xid-79"}
    assert {"key": "example.com/dedicated", "value": "ml", "effect": "NoSchedule"} in node["spec"]["taints"]
    assert node["metadata"]["annotations"][CORDONED] == "true"
    assert not node_obj(kube_emulator, "h200-2")["spec"].get("unschedulable")
    # capacity and placement count the node out
    assert gpus_by_host_and_model()[("gpu-east", "h200-141gb")] == (16, 8)


def test_a_fatal_node_problem_detector_condition_quarantines_the_node_and_a_clean_window_releases_it(
    host, kube_emulator, settings
):
    settings.HEALTH_EVENT_CLEAR_AFTER = 0
    settings.HEALTH_CLEAN_WINDOW = 0
    kube_emulator.set_node_condition(
        "h200-2", "KernelDeadlock", "True", "DockerHung", "task docker:7 blocked"
    )
    kube_emulator.set_node_condition("h200-2", "FrequentDockerRestart", "True", "FrequentDockerRestart", "")
    outcome = health_pass(host)
    assert outcome.writes == 1  # one patch cordons and taints h200-2; h200-1 needs none
    node = node_obj(kube_emulator, "h200-2")
    assert node["spec"]["unschedulable"] is True
    assert our_taint(node)["value"] == "condition-KernelDeadlock"
    events = {e.signal: e for e in HealthEvent.objects.filter(node__name="h200-2")}
    assert events["condition:KernelDeadlock"].severity == "fatal"
    assert events["condition:FrequentDockerRestart"].severity == "warning"
    assert "task docker:7 blocked" in events["condition:KernelDeadlock"].message
    assert health_pass(host).writes == 0  # as desired already: no write

    kube_emulator.set_node_condition("h200-2", "KernelDeadlock", "False", "KernelHasNoDeadlock", "")
    assert health_pass(host).released == 1
    node = node_obj(kube_emulator, "h200-2")
    assert not node["spec"].get("unschedulable")
    assert our_taint(node) is None
    assert CORDONED not in (node["metadata"].get("annotations") or {})
    assert node["spec"]["taints"] == [{"key": "example.com/dedicated", "value": "ml", "effect": "NoSchedule"}]
    assert Node.objects.get(name="h200-2").state == Node.State.READY
    release = AuditEvent.objects.get(action="node.release", object_id="h200-2")
    assert release.actor_label == "system:health"


def test_release_keeps_a_cordon_gpucloud_did_not_make(host, kube_emulator, settings):
    settings.HEALTH_EVENT_CLEAR_AFTER = 0
    settings.HEALTH_CLEAN_WINDOW = 0
    kube_emulator.edit_object("v1", "Node", "h200-1", None, {"spec": {"unschedulable": True}})
    kube_emulator.set_node_condition("h200-1", "ReadonlyFilesystem", "True", "FilesystemIsReadOnly", "")
    health_pass(host)
    assert our_taint(node_obj(kube_emulator, "h200-1")) is not None
    kube_emulator.set_node_condition("h200-1", "ReadonlyFilesystem", "False", "", "")
    health_pass(host)
    node = node_obj(kube_emulator, "h200-1")
    assert our_taint(node) is None
    assert node["spec"]["unschedulable"] is True


def test_a_node_not_ready_is_a_warning_and_quarantines_nothing(host, kube_emulator):
    kube_emulator.set_node_condition("h200-1", "Ready", "False", "KubeletNotReady", "PLEG is not healthy")
    health_pass(host)
    event = HealthEvent.objects.get()
    assert (event.signal, event.value, event.severity) == ("node_not_ready", "False", "warning")
    assert not Quarantine.objects.exists()


def test_draining_is_off_by_default_and_evicts_through_the_eviction_api_when_on(
    host, kube_emulator, settings
):
    settings.HEALTH_EVENT_CLEAR_AFTER = 0
    kube_emulator.put_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "tenant-acme"}})
    for name in ("train-0", "keep-0"):
        kube_emulator.put_object(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": name, "namespace": "tenant-acme"},
                "spec": {"nodeName": "h200-1"},
                "status": {"phase": "Running"},
            }
        )
    kube_emulator.set_node_condition("h200-1", "KernelDeadlock", "True", "", "")
    assert health_pass(host).evictions == 0
    assert len(kube_emulator.objects_of("v1", "Pod")) == 2
    settings.HEALTH_DRAIN = True
    kube_emulator.disruption_blocked.add("tenant-acme/keep-0")
    assert health_pass(host).evictions == 1
    assert [p["metadata"]["name"] for p in kube_emulator.objects_of("v1", "Pod")] == ["keep-0"]


def test_the_notification_names_the_gpu_and_the_models_over_the_alert_share(host, settings, mailoutbox):
    settings.HEALTH_ALERT_SHARE = 0.4
    settings.HEALTH_ALERT_EMAILS = ["oncall@example.com"]
    scrape(host, 0)
    scrape(host, 30, faults={0: 79})
    first = Quarantine.objects.get()
    message = alerts.notify(first.pk)
    assert message is not None
    assert message["gpu"] == real_uuid("h200-1", 0)
    assert message["reason"] == "xid-79"
    assert message["models_over_threshold"] == []  # 1 of 16 out
    scrape(host, 60, faults=dict.fromkeys(range(7), 79))  # 7 of 16 H200s out: 44 %
    message = alerts.notify(Quarantine.objects.order_by("id").last().pk)
    assert message is not None
    assert message["models_over_threshold"] == [{"model": "h200-141gb", "gpus": 16, "out": 7}]
    assert [m.to for m in mailoutbox] == [["admin@example.com", "oncall@example.com"]] * 2
    assert "h200-141gb: 7 of 16 GPUs out (44%)" in mailoutbox[-1].body
    assert "xid-79" in mailoutbox[-1].subject
