"""Retiring a host cluster (clusters/lifecycle.py): refused while tenants or running pods are on it, kept with
its history, and out of everything live (passes, capacity, placement); un-retired back into service.

`small` (one simulated node of 8 × H200) is the cluster retired; `demo` (64 × H200, 40 × A100) stays in
service.
"""

from __future__ import annotations

import io
from datetime import timedelta
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from billing import collect
from billing.models import UsageEntry
from billing.services.ingest import ingest_scrape
from billing.tests.conftest import T0, Row, exposition
from clusters import lifecycle
from clusters import tasks as cluster_tasks
from clusters.reconcile import tenants as reconcile
from core.audit import Actor
from core.models import AuditEvent
from fleet.models import Gpu, GpuClass, HostCluster, Pod
from gpucloud import celery as names
from gpucloud.errors import Conflict
from health import tasks as health_tasks
from placement import tasks as placement_tasks
from placement.service import capacity_rows
from simulator import workloads as simulator
from tenants import capacity
from tenants.models import Tenant, TenantCluster
from tenants.services import lifecycle as tenants

URL = "/api/v1/host-clusters/small/"


def tenant_on(admin: Any, slug: str, host_cluster: HostCluster) -> Tenant:
    return tenants.create_tenant(actor=Actor.of(admin), slug=slug, host_cluster=host_cluster)


def pod_on(host_cluster: HostCluster, name: str, tenant: Tenant | None, ended: bool = False) -> Pod:
    """A pod holding GPU 0 of the host cluster's first node, started an hour ago (ended now if `ended`)."""
    node = host_cluster.nodes.order_by("name").first()
    assert node is not None
    now = timezone.now()
    return Pod.objects.create(
        host_cluster=host_cluster,
        tenant=tenant,
        namespace=f"tenant-{tenant.slug}" if tenant else "platform",
        name=name,
        gpu_class=GpuClass.objects.get(name="h200-141gb"),
        node=node,
        gpu_uuids=[node.gpus.get(index=0).uuid],
        started_at=now - timedelta(hours=1),
        finished_at=now if ended else None,
    )


def retire(host_cluster: HostCluster) -> HostCluster:
    return lifecycle.retire_host_cluster(actor=Actor.console("tests"), host_cluster=host_cluster)


# --------------------------------------------------------------------------------------------- refusals


def test_a_host_cluster_with_tenants_is_not_retired_and_the_answer_names_them(small_fleet, api, admin):
    tenant_on(admin, "vision", small_fleet)
    tenant_on(admin, "nlp", small_fleet)

    refused = api(admin).post(URL + "retire/", {}, format="json")

    assert refused.status_code == 409
    assert refused.json()["errors"]["tenants"] == ["nlp", "vision"]
    assert "still runs tenants nlp, vision: drain it" in refused.json()["detail"]
    assert HostCluster.objects.get(pk=small_fleet.pk).state == HostCluster.State.READY
    assert not AuditEvent.objects.filter(action="host_cluster.retire").exists()


def test_a_host_cluster_with_pods_not_seen_to_end_is_not_retired(small_fleet, api, admin):
    gone = tenant_on(admin, "vision", small_fleet)
    Tenant.objects.filter(pk=gone.pk).update(state=Tenant.State.DELETED)
    pod_on(small_fleet, "train-1", gone)

    refused = api(admin).post(URL + "retire/", {}, format="json")

    assert refused.status_code == 409
    assert refused.json()["errors"]["pods"] == ["tenant-vision/train-1"]
    assert "1 pods not seen to end (tenant-vision/train-1)" in refused.json()["detail"]
    assert HostCluster.objects.get(pk=small_fleet.pk).state == HostCluster.State.READY


def test_only_platform_administrators_retire_or_unretire(small_fleet, api, make_user):
    client = api(make_user("alice"))
    assert client.post(URL + "retire/", {}, format="json").status_code == 403
    assert client.post(URL + "unretire/", {}, format="json").status_code == 403
    assert HostCluster.objects.get(pk=small_fleet.pk).state == HostCluster.State.READY


def test_a_dry_retire_answers_as_the_retire_would_and_keeps_nothing(small_fleet, api, admin):
    client = api(admin)
    tenant = tenant_on(admin, "vision", small_fleet)
    refused = client.post(URL + "retire/?dry_run=true", {}, format="json")
    assert refused.status_code == 409
    assert refused.json()["errors"]["tenants"] == ["vision"]

    Tenant.objects.filter(pk=tenant.pk).update(state=Tenant.State.DELETED)
    answered = client.post(URL + "retire/?dry_run=true", {}, format="json")
    assert answered.status_code == 200, answered.json()
    assert answered["Dry-Run"] == "true"
    assert answered.json()["state"] == "retired"
    assert HostCluster.objects.get(pk=small_fleet.pk).state == HostCluster.State.READY
    assert not AuditEvent.objects.filter(action="host_cluster.retire").exists()
    other = client.post(URL + "cordon/?dry_run=true", {}, format="json")
    assert other.status_code == 400  # only the retire offers a dry run here
    assert not HostCluster.objects.get(pk=small_fleet.pk).cordoned


# --------------------------------------------------------------------------------------------- retire


def test_a_retired_host_cluster_keeps_its_history_and_is_listed_as_retired(small_fleet, api, admin):
    client = api(admin)
    gone = tenant_on(admin, "vision", small_fleet)
    pod_on(small_fleet, "train-1", gone, ended=True)
    Tenant.objects.filter(pk=gone.pk).update(state=Tenant.State.DELETED)
    HostCluster.objects.filter(pk=small_fleet.pk).update(status_message="last seen fine")
    nodes, gpus = small_fleet.nodes.count(), Gpu.objects.filter(node__host_cluster=small_fleet).count()

    response = client.post(URL + "retire/", {"reason": "end of lease"}, format="json")

    assert response.status_code == 200, response.json()
    body = response.json()
    assert (body["state"], body["cordoned"], body["cordon_reason"]) == ("retired", True, "end of lease")
    assert body["status_message"] == "last seen fine"
    assert (body["nodes"], body["gpus"]) == (nodes, gpus)
    assert Pod.objects.filter(host_cluster=small_fleet, name="train-1").exists()
    assert TenantCluster.objects.filter(tenant=gone, host_cluster=small_fleet).exists()
    listed = {row["name"]: row["state"] for row in client.get("/api/v1/host-clusters/").json()["results"]}
    assert listed == {"demo": "ready", "small": "retired"}
    event = AuditEvent.objects.get(action="host_cluster.retire")
    assert (event.object_id, event.actor) == (small_fleet.public_id, admin)
    assert (event.before["state"], event.after["state"]) == ("ready", "retired")
    assert (event.before["cordoned"], event.after["cordoned"]) == (False, True)

    again = client.post(URL + "retire/", {}, format="json")
    assert again.json()["cordon_reason"] == "end of lease"
    assert AuditEvent.objects.filter(action="host_cluster.retire").count() == 1


def test_a_retired_host_cluster_keeps_the_cordon_reason_it_had(small_fleet, admin):
    actor = Actor.of(admin)
    lifecycle.cordon_host_cluster(actor=actor, host_cluster=small_fleet, reason="hardware refresh")
    retired = retire(small_fleet)
    assert (retired.state, retired.cordon_reason) == ("retired", "hardware refresh")


def test_a_pass_that_read_the_cluster_before_the_retire_does_not_bring_it_back(small_fleet):
    stale = HostCluster.objects.get(pk=small_fleet.pk)
    retire(small_fleet)

    assert stale.mark(HostCluster.State.UNREACHABLE, "connection refused") is False
    assert HostCluster.objects.get(pk=small_fleet.pk).state == HostCluster.State.RETIRED


def test_a_past_tenants_usage_reads_the_same_after_the_retire(small_fleet, api, admin):
    gone = tenant_on(admin, "vision", small_fleet)
    node = small_fleet.nodes.get()
    uuid = node.gpus.get(index=0).uuid
    model = "NVIDIA H200 141GB HBM3e"
    for t in (0, 30, 60):
        rows = [Row(uuid, model=model, pod="tenant-vision/train-1")]
        ingest_scrape(small_fleet, node.name, T0 + timedelta(seconds=t), exposition(node.name, rows))
    client = api(admin)
    before = client.get("/api/v1/usage/?tenant=vision").json()["results"]
    assert [(r["tenant"], r["gpu_seconds"]) for r in before] == [("vision", "60.000000")]
    Tenant.objects.filter(pk=gone.pk).update(state=Tenant.State.DELETED)

    retire(small_fleet)

    assert client.get("/api/v1/usage/?tenant=vision").json()["results"] == before
    assert UsageEntry.objects.filter(host_cluster=small_fleet).exists()
    assert client.delete(URL).status_code == 409  # the ledger keeps it


# --------------------------------------------------------------------------------------------- out of service


def test_a_retired_host_cluster_takes_no_tenant(small_fleet, api, admin):
    retire(small_fleet)
    client = api(admin)

    named = client.post("/api/v1/tenants/", {"slug": "vision", "host_cluster": "small"}, format="json")
    assert named.status_code == 409
    assert "host cluster small is retired" in named.json()["detail"]
    assert named.json()["errors"]["host_cluster"] == ["retired: takes no tenants"]
    assert [c.name for c in capacity.pick_order()] == ["demo"]
    picked = client.post("/api/v1/tenants/", {"slug": "nlp"}, format="json")
    assert picked.status_code == 201
    assert TenantCluster.objects.get(tenant__slug="nlp").host_cluster.name == "demo"

    uncordon = client.post(URL + "uncordon/", {}, format="json")
    assert uncordon.status_code == 409
    assert "un-retire it first" in uncordon.json()["detail"]
    drain = client.post("/api/v1/host-clusters/demo/drain/", {"target": "small"}, format="json")
    assert drain.status_code == 400
    assert "small is retired" in drain.json()["errors"]["target"][0]


def test_a_retire_that_commits_while_a_tenant_is_created_refuses_the_tenant(small_fleet, admin):
    """The tenant was checked against the cluster as it was read before the retire."""
    before = HostCluster.objects.get(pk=small_fleet.pk)
    retire(small_fleet)
    with pytest.raises(Conflict, match="small was retired meanwhile"):
        tenants.create_tenant(actor=Actor.of(admin), slug="late", host_cluster=before)
    assert not Tenant.objects.filter(slug="late").exists()


def test_a_drain_to_a_target_retired_since_it_was_read_keeps_the_tenant(small_fleet, demo_fleet, admin):
    tenant = tenant_on(admin, "vision", demo_fleet)
    stale = HostCluster.objects.get(pk=small_fleet.pk)
    retire(small_fleet)

    report = lifecycle.drain_host_cluster(actor=Actor.of(admin), host_cluster=demo_fleet, target=stale)

    assert report.moved == {}
    assert report.refused["vision"] == (
        "no host cluster admits its guarantees: small: it was retired meanwhile"
    )
    assert TenantCluster.objects.get(tenant=tenant).host_cluster == demo_fleet


def test_a_retired_host_cluster_is_no_capacity_and_what_if_refuses_it(small_fleet, api, admin):
    client = api(admin)
    before = {row["host_cluster"] for row in capacity_rows()}
    assert before == {"demo", "small"}
    offered = [c.name for c in capacity.classes_offered(host_cluster=small_fleet)]
    assert "h200-141gb" in offered

    retire(small_fleet)

    assert {row["host_cluster"] for row in capacity_rows()} == {"demo"}
    assert client.get("/api/v1/fleet/capacity/?host_cluster=small").json()["results"] == []
    assert ("small", "h200-141gb") not in capacity.gpus_by_host_and_model()
    assert capacity.classes_offered(host_cluster=small_fleet) == []
    gang = {"gang": {"pods": 1, "gpus_per_pod": 1, "gpu_class": "h200-141gb"}, "host_cluster": "small"}
    what_if = client.post("/api/v1/fleet/what-if/", gang, format="json")
    assert what_if.status_code == 400
    assert "small is retired" in what_if.json()["errors"]["host_cluster"][0]


def test_no_periodic_pass_goes_over_a_retired_host_cluster(small_fleet, demo_fleet, monkeypatch):
    kube = HostCluster.objects.create(name="kube-old", driver=HostCluster.Driver.KUBERNETES)
    kube_live = HostCluster.objects.create(name="kube-live", driver=HostCluster.Driver.KUBERNETES)
    HostCluster.objects.filter(pk=kube.pk).update(state=HostCluster.State.RETIRED)
    retire(small_fleet)
    sent: list[tuple[str, int]] = []
    for module in (cluster_tasks, health_tasks, placement_tasks):
        monkeypatch.setattr(module, "enqueue", lambda name, *args, **kw: sent.append((name, *args)))
    collected: list[str] = []
    monkeypatch.setattr(collect, "collect_host_cluster", lambda hc, at=None: collected.append(hc.name))

    cluster_tasks.reconcile_all()
    health_tasks.health_pass_all()
    placement_tasks.live_pass_all()
    collect.collect_all()

    live = {demo_fleet.pk, kube_live.pk}
    assert {pk for name, pk in sent if name == names.FULL_PASS} == live
    assert {pk for name, pk in sent if name == names.HEALTH_PASS} == live
    assert {pk for name, pk in sent if name == names.LIVE_PASS} == {kube_live.pk}
    assert sorted(collected) == ["demo", "kube-live"]
    assert [c.name for c in simulator.simulated_host_clusters()] == ["demo"]


def test_a_pass_asked_before_the_retire_leaves_the_retired_cluster_alone(small_fleet, monkeypatch):
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a retired host cluster was reconciled")

    monkeypatch.setattr(reconcile, "reconcile_host_cluster", refuse)
    retire(small_fleet)

    cluster_tasks.full_pass(small_fleet.pk)
    cluster_tasks.reconcile_host_cluster(small_fleet.pk)
    health_tasks.health_pass(small_fleet.pk)


# --------------------------------------------------------------------------------------------- unretire


def test_an_unretired_host_cluster_is_back_in_service_still_cordoned(small_fleet, api, admin, monkeypatch):
    client = api(admin)
    client.post(URL + "retire/", {"reason": "end of lease"}, format="json")

    answer = client.post(URL + "unretire/", {}, format="json")

    assert answer.status_code == 200, answer.json()
    assert (answer.json()["state"], answer.json()["cordoned"]) == ("ready", True)
    event = AuditEvent.objects.get(action="host_cluster.unretire")
    assert (event.before["state"], event.after["state"]) == ("retired", "ready")
    sent: list[tuple[str, int]] = []
    monkeypatch.setattr(cluster_tasks, "enqueue", lambda name, *args, **kw: sent.append((name, *args)))
    cluster_tasks.reconcile_all()
    assert (names.FULL_PASS, small_fleet.pk) in sent
    assert {row["host_cluster"] for row in capacity_rows()} == {"demo", "small"}
    assert client.post(URL + "uncordon/", {}, format="json").json()["cordoned"] is False
    assert client.post(URL + "unretire/", {}, format="json").status_code == 200  # in service: no change
    assert AuditEvent.objects.filter(action="host_cluster.unretire").count() == 1


# --------------------------------------------------------------------------------------------- delete


def test_a_retired_host_cluster_with_history_is_not_deleted_and_an_empty_one_is(small_fleet, api, admin):
    client = api(admin)
    gone = tenant_on(admin, "vision", small_fleet)
    Tenant.objects.filter(pk=gone.pk).update(state=Tenant.State.DELETED)
    kept = client.delete(URL)
    assert kept.status_code == 409
    assert kept.json()["detail"].endswith("retire it instead")

    client.post(URL + "retire/", {}, format="json")
    still = client.delete(URL)
    assert still.status_code == 409
    assert still.json()["detail"].endswith("it stays retired")

    TenantCluster.objects.filter(tenant=gone).delete()  # no history left
    assert client.delete(URL).status_code == 204
    assert not HostCluster.objects.filter(name="small").exists()


# --------------------------------------------------------------------------------------------- manage.py


def test_the_console_retires_and_unretires_with_the_same_rules(small_fleet, admin):
    tenant = tenant_on(admin, "vision", small_fleet)
    out = io.StringIO()
    with pytest.raises(CommandError, match="still runs tenants vision"):
        call_command("host_cluster", "retire", "small")
    Tenant.objects.filter(pk=tenant.pk).update(state=Tenant.State.DELETED)

    call_command("host_cluster", "retire", "small", "--reason", "end of lease", stdout=out)
    call_command("host_cluster", "unretire", "small", stdout=out)

    assert out.getvalue().splitlines() == [
        "host cluster small is retired: out of service, its history kept",
        "host cluster small is back in service, still cordoned: uncordon it to take tenants",
    ]
    actors = set(
        AuditEvent.objects.filter(action__in=["host_cluster.retire", "host_cluster.unretire"]).values_list(
            "actor_label", flat=True
        )
    )
    assert actors == {"console:host_cluster"}
    assert HostCluster.objects.get(pk=small_fleet.pk).cordon_reason == "end of lease"
