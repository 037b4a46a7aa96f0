"""Dedicated nodes on a Kubernetes host cluster (the API stand-in through the real client): the reconcile
labels and taints an isolated tenant's nodes `gpucloud.io/tenant=<slug>:NoSchedule`, restores them when
removed by hand, keeps the quarantine taint health puts on the same nodes (and health keeps ours), and takes
both off a node returned to the pool once none of the tenant's pods runs there."""

from __future__ import annotations

from typing import Any

import pytest

from clusters.drivers import conformance
from clusters.drivers.discovery import ClusterDiscovery
from clusters.reconcile import tenants as reconcile
from clusters.tests.conftest import kubeconfig_for
from fleet.models import HostCluster
from gpucloud.kube.api import KubeApi
from gpucloud.kube.meta import DEDICATED_TO
from gpucloud.kube.nodes import change_node, with_taint
from health.node_driver import NodeHealthDriver
from tenants.models import DedicatedNode
from tests.kube_emulator import gpu_node, gpu_pod

pytestmark = pytest.mark.django_db(transaction=True)
TAINT = {"key": DEDICATED_TO, "value": "solo", "effect": "NoSchedule"}


@pytest.fixture
def cluster(kube_emulator, api, admin, gpu_catalog) -> HostCluster:
    """`gpu-east`: two 8 × H200 nodes, running Kueue."""
    for n in (1, 2):
        kube_emulator.put_object(gpu_node(f"h200-{n}"))
    body = {"name": "gpu-east", "kubeconfig": kubeconfig_for(kube_emulator.url), "scheduler": "kueue"}
    assert api(admin).post("/api/v1/host-clusters/", body, format="json").status_code == 201
    return HostCluster.objects.get(name="gpu-east")


def tenant(api: Any, admin: Any, slug: str, guaranteed: int, tier: str = "isolated") -> None:
    client = api(admin)
    body = {"slug": slug, "host_cluster": "gpu-east", "trust_tier": tier}
    assert client.post("/api/v1/tenants/", body, format="json").status_code == 201
    set_guarantee(api, admin, slug, guaranteed)


def set_guarantee(api: Any, admin: Any, slug: str, guaranteed: int) -> None:
    url = f"/api/v1/tenants/{slug}/quotas/h200-141gb/"
    response = api(admin).put(url, {"guaranteed": guaranteed}, format="json")
    assert response.status_code in (200, 201), response.json()


def node(em: Any, name: str) -> dict[str, Any]:
    found: dict[str, Any] = em.get_object("v1", "Node", name)
    return found


def labels(em: Any, name: str) -> dict[str, str]:
    return node(em, name)["metadata"].get("labels") or {}


def taints(em: Any, name: str) -> list[dict[str, Any]]:
    return (node(em, name).get("spec") or {}).get("taints") or []


def dedicated() -> str:
    [name] = DedicatedNode.objects.filter(tenant__slug="solo").values_list("node__name", flat=True)
    return name


def other(name: str) -> str:
    return "h200-2" if name == "h200-1" else "h200-1"


def test_an_isolated_tenants_node_is_labelled_and_tainted_and_its_vcluster_syncs_only_it(
    cluster, kube_emulator, api, admin
):
    tenant(api, admin, "solo", 3)

    reconcile.reconcile_host_cluster(cluster)

    mine = dedicated()
    assert labels(kube_emulator, mine)[DEDICATED_TO] == "solo"
    assert TAINT in taints(kube_emulator, mine)
    assert DEDICATED_TO not in labels(kube_emulator, other(mine))
    assert taints(kube_emulator, other(mine)) == []
    release = kube_emulator.get_object("helm.toolkit.fluxcd.io/v2", "HelmRelease", "solo", "tenant-solo")
    values = release["spec"]["values"]
    assert values["sync"]["fromHost"]["nodes"]["selector"]["labels"][DEDICATED_TO] == "solo"
    assert values["sync"]["toHost"]["pods"]["enforceTolerations"] == ["gpucloud.io/tenant=solo:NoSchedule"]
    version = node(kube_emulator, mine)["metadata"]["resourceVersion"]
    reconcile.reconcile_host_cluster(cluster)
    assert node(kube_emulator, mine)["metadata"]["resourceVersion"] == version, "as desired: no write"


def test_a_label_or_taint_removed_or_added_by_hand_is_restored_at_the_next_pass(
    cluster, kube_emulator, api, admin
):
    tenant(api, admin, "solo", 8)
    reconcile.reconcile_host_cluster(cluster)
    mine = dedicated()
    kube_emulator.edit_object("v1", "Node", mine, None, {"metadata": {"labels": {DEDICATED_TO: None}}})
    kube_emulator.edit_object("v1", "Node", mine, None, {"spec": {"taints": None}})
    forged = {"metadata": {"labels": {DEDICATED_TO: "solo"}}, "spec": {"taints": [TAINT]}}
    kube_emulator.edit_object("v1", "Node", other(mine), None, forged)

    reconcile.reconcile_host_cluster(cluster)

    assert labels(kube_emulator, mine)[DEDICATED_TO] == "solo"
    assert taints(kube_emulator, mine) == [TAINT]
    assert DEDICATED_TO not in labels(kube_emulator, other(mine))
    assert taints(kube_emulator, other(mine)) == []


def test_the_quarantine_and_the_dedication_keep_each_others_taints(
    cluster, kube_emulator, api, admin, kube_client
):
    tenant(api, admin, "solo", 8)
    reconcile.reconcile_host_cluster(cluster)
    mine = dedicated()
    health = NodeHealthDriver(kube_client)

    health.apply(health.list_nodes(), {mine: "xid-79"}, {})
    reconcile.reconcile_host_cluster(cluster)

    keys = {t["key"]: t.get("value") for t in taints(kube_emulator, mine)}
    assert keys == {DEDICATED_TO: "solo", "gpucloud.io/quarantine": "xid-79"}
    health.apply(health.list_nodes(), {}, {})
    assert taints(kube_emulator, mine) == [TAINT], "released: only the quarantine taint goes"


def test_a_write_between_the_read_and_the_patch_is_not_lost(kube_emulator, kube_client):
    kube_emulator.put_object(gpu_node("n"))
    api = KubeApi(kube_client)
    stale = api.get("/api/v1/nodes/n")
    calls: list[str] = []

    def change(obj: dict[str, Any]) -> dict[str, Any]:
        if not calls:  # someone else writes the node after our read
            other = {"key": "gpucloud.io/quarantine", "value": "xid-48", "effect": "NoSchedule"}
            kube_emulator.edit_object("v1", "Node", "n", None, {"spec": {"taints": [other]}})
        calls.append(obj["metadata"]["resourceVersion"])
        return {"spec": {"taints": with_taint(obj, DEDICATED_TO, TAINT)}}

    assert change_node(api, stale, change)

    assert len(calls) == 2, "refused (409) once, recomputed from a fresh read"
    assert {t["key"] for t in taints(kube_emulator, "n")} == {DEDICATED_TO, "gpucloud.io/quarantine"}


def test_a_node_is_returned_and_untainted_only_once_the_tenants_pods_are_gone(
    cluster, kube_emulator, api, admin
):
    tenant(api, admin, "solo", 8)
    reconcile.reconcile_host_cluster(cluster)
    mine = dedicated()
    kube_emulator.put_object(gpu_pod("train-0", "tenant-solo", mine))
    set_guarantee(api, admin, "solo", 0)

    reconcile.reconcile_host_cluster(cluster)
    assert dedicated() == mine
    assert TAINT in taints(kube_emulator, mine)

    kube_emulator.remove_object("v1", "Pod", "train-0", "tenant-solo")
    reconcile.reconcile_host_cluster(cluster)

    assert not DedicatedNode.objects.exists()
    assert DEDICATED_TO not in labels(kube_emulator, mine)
    assert taints(kube_emulator, mine) == []


def test_the_conformance_report_says_whether_gpucloud_may_label_and_taint_nodes(cluster, api, admin):
    reconcile.reconcile_host_cluster(cluster)

    body = api(admin).get("/api/v1/host-clusters/gpu-east/conformance/").json()
    found = {c["name"]: c for c in body["capabilities"]}["dedicated_nodes"]
    assert found["found"]
    assert found["version"] == "patch nodes allowed; 0 of 2 GPU nodes dedicated to isolated tenants"


def test_a_cluster_that_refuses_or_cannot_answer_is_reported_with_what_gpucloud_needs():
    nodes = [gpu_node("h200-1")]
    for answer, seen in ((False, "patch nodes refused"), (None, "could not ask")):
        found = ClusterDiscovery("v1.33.0", {}, nodes, False, node_patch=answer)
        [capability] = [
            c
            for c in conformance.check(found, mig_configmap="m", plugin_configmap="p")
            if c.name == "dedicated_nodes"
        ]
        assert not capability.found
        assert capability.version.startswith(seen)
        assert "--verb=get,list,patch --resource=nodes" in capability.how
        assert "their pods wait" in capability.without


def test_a_quarantine_computed_before_the_dedication_was_written_keeps_it(
    cluster, kube_emulator, api, admin, kube_client
):
    tenant(api, admin, "solo", 8)
    health = NodeHealthDriver(kube_client)
    listed = health.list_nodes()  # health reads the nodes first…
    reconcile.reconcile_host_cluster(cluster)  # …the dedication is written meanwhile…
    mine = dedicated()

    health.apply(
        listed, {mine: "xid-79"}, {}
    )  # …and health's write, from its stale read, is refused and redone

    keys = {t["key"]: t.get("value") for t in taints(kube_emulator, mine)}
    assert keys == {DEDICATED_TO: "solo", "gpucloud.io/quarantine": "xid-79"}
    assert labels(kube_emulator, mine)[DEDICATED_TO] == "solo"
