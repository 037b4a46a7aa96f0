"""Issue 27 item 4: the fleet's nodes follow a Kubernetes host cluster, one reconcile pass at a time.

The cluster is the Kubernetes API stand-in; `host` is registered with two 8 × H200 nodes (h200-1, h200-2).
"""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from clusters.reconcile import tenants as reconcile
from clusters.tests.conftest import h200_node
from core.models import AuditEvent
from fleet.models import Gpu, HostCluster, Node
from fleet.selectors import IN_SERVICE
from health.models import HealthEvent
from tests.kube_emulator import Faults, RunningEmulator


def a_pass(host: HostCluster) -> None:
    reconcile.reconcile_host_cluster(HostCluster.objects.get(pk=host.pk))


def counts(api: Any, admin: Any) -> tuple[int, int]:
    body = api(admin).get("/api/v1/host-clusters/gpu-east/").json()
    return body["nodes"], body["gpus"]


def test_a_node_added_to_the_cluster_is_imported_within_one_pass(host, kube_emulator, api, admin):
    joined = h200_node("h200-3")
    joined["status"]["allocatable"] |= {"cpu": "64", "memory": "512Gi"}
    kube_emulator.put_object(joined)

    a_pass(host)

    node = Node.objects.get(host_cluster=host, name="h200-3")
    assert node.state == Node.State.READY
    assert (node.cpu_milli, node.memory_mib, node.zone, node.rack) == (64_000, 524_288, "zone-a", "rack-1")
    assert Gpu.objects.filter(IN_SERVICE, node=node).count() == 8
    assert counts(api, admin) == (3, 24)
    event = AuditEvent.objects.get(action="node.join")
    assert (event.actor_label, event.object_id) == ("system:node-sync", "gpu-east/h200-3")


def test_a_removed_node_is_marked_gone_with_its_history_kept_and_leaves_capacity(
    host, kube_emulator, api, admin
):
    for name in ("h200-1", "h200-2"):  # room for whole-GPU pods (4 cores and 32 GiB each)
        node = kube_emulator.get_object("v1", "Node", name)
        node["status"]["allocatable"] |= {"cpu": "96", "memory": "1056Gi"}
        kube_emulator.put_object(node)
    a_pass(host)
    gone = Node.objects.get(host_cluster=host, name="h200-2")
    assert gone.cpu_milli == 96_000
    now = timezone.now()
    HealthEvent.objects.create(
        host_cluster=host, node=gone, subject="node", signal="xid", value="79", severity="fatal",
        action="none", source="dcgm", first_seen=now, last_seen=now,
    )  # fmt: skip
    kube_emulator.remove_object("v1", "Node", "h200-2")

    a_pass(host)

    gone.refresh_from_db()
    assert gone.state == Node.State.GONE
    assert gone.gone_at is not None
    assert gone.gpus.count() == 8  # its GPUs stay, as history
    assert HealthEvent.objects.filter(node=gone).exists()
    assert not Gpu.objects.filter(IN_SERVICE, node=gone).exists()
    assert counts(api, admin) == (1, 8)
    ask = {"trust_tier": "standard", "gpu_class": "h200-141gb", "guaranteed": 9}
    answer = api(admin).post(
        "/api/v1/fleet/what-if/", {"host_cluster": "gpu-east", "quotas": [ask]}, format="json"
    )
    assert answer.status_code == 200, answer.json()
    (line,) = answer.json()["quotas"]
    assert line["fits"] is False
    assert line["nodes"] == [{"node": "h200-1", "units": 8}]  # the placement model has no h200-2
    assert AuditEvent.objects.get(action="node.gone").object_id == "gpu-east/h200-2"

    a_pass(host)  # still gone: nothing more happens
    assert AuditEvent.objects.filter(action="node.gone").count() == 1


def test_a_node_that_comes_back_returns_in_the_state_it_left_in(host, kube_emulator, api, admin):
    Node.objects.filter(name="h200-2").update(state=Node.State.QUARANTINED)
    kube_emulator.remove_object("v1", "Node", "h200-2")
    a_pass(host)
    assert Node.objects.get(name="h200-2").state == Node.State.GONE

    kube_emulator.put_object(h200_node("h200-2"))
    a_pass(host)

    node = Node.objects.get(name="h200-2")
    assert (node.state, node.gone_at) == (Node.State.QUARANTINED, None)
    assert node.gpus.count() == 8
    assert AuditEvent.objects.get(action="node.return").after["state"] == "quarantined"


def test_labels_allocatable_topology_and_gpus_follow_the_cluster(host, kube_emulator):
    node = kube_emulator.get_object("v1", "Node", "h200-1")
    node["metadata"]["labels"] |= {
        "topology.kubernetes.io/zone": "zone-b",
        "example.com/topology-rack": "rack-9",
        "nvidia.com/gpu.count": "4",
        "team": "vision",
    }
    node["status"]["allocatable"] |= {"cpu": "32"}
    kube_emulator.put_object(node)

    a_pass(host)

    row = Node.objects.get(name="h200-1")
    assert (row.zone, row.rack, row.cpu_milli) == ("zone-b", "rack-9", 32_000)
    assert row.labels["team"] == "vision"
    assert sorted(row.gpus.values_list("index", flat=True)) == [0, 1, 2, 3]
    change = AuditEvent.objects.get(action="node.update")
    assert (change.after["before"]["gpus"], change.after["after"]["gpus"]) == (8, 4)


def test_an_unchanged_cluster_costs_the_node_sync_no_writes(host, kube_emulator):
    a_pass(host)
    before = [(n.pk, n.labels, n.state) for n in Node.objects.order_by("pk")]
    events = AuditEvent.objects.count()
    a_pass(host)
    assert [(n.pk, n.labels, n.state) for n in Node.objects.order_by("pk")] == before
    assert AuditEvent.objects.count() == events


def test_a_node_list_that_fails_marks_nothing_gone(host, kube_emulator: RunningEmulator):
    kube_emulator.emulator.faults = Faults(forbidden={"/api/v1/nodes"})

    a_pass(host)

    assert set(Node.objects.values_list("state", flat=True)) == {Node.State.READY}
    assert not AuditEvent.objects.filter(action="node.gone").exists()
