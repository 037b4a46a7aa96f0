"""The live view of a Kubernetes host cluster: pods in tenant namespaces on the API stand-in become the
`fleet.Pod` rows that "in use", the fleet map, capacity and what-if read, with their exact times."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.db.models import Sum
from django.test.utils import CaptureQueriesContext

from billing.lifecycle import pod_facts
from billing.models import UsageEntry
from billing.services.ingest import ingest_rounds
from billing.tests.conftest import Row, exposition
from clusters.tests.conftest import host  # noqa: F401  (the registered host cluster fixture)
from core.audit import Actor
from fleet import selectors as fleet
from fleet.models import GpuClass, HostCluster, Pod, PodWatch
from gpucloud import celery as names
from gpucloud.kube.api import KubeApi, RetryPolicy, api_client_for_url
from placement import tasks
from placement.live.view import LiveView
from placement.live.watch import live_pass
from placement.service import FleetModel, class_figures, running_pods
from tenants.models import Tenant
from tenants.services import lifecycle, quotas
from tests.kube_emulator import RunningEmulator

T0 = datetime(2026, 12, 1, 9, 0, 0, tzinfo=UTC)  # in the past: what-if asks about now
FAST = RetryPolicy(attempts=1, timeout_seconds=5.0)


def rfc(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def gpu_pod(
    name: str, node: str, *, ns: str = "tenant-vision", gpus: int = 0, mig: str = "", start: datetime = T0
) -> dict[str, Any]:
    resource = {"nvidia.com/gpu": str(gpus)} if gpus else {f"nvidia.com/mig-{mig}": "1"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {"requests": resource}}]},
        "status": {
            "phase": "Running",
            "startTime": rfc(start),
            "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": rfc(start)}],
        },
    }


def finish(em: RunningEmulator, name: str, at: datetime, ns: str = "tenant-vision") -> None:
    """The kubelet's last word on a pod: Succeeded, its container terminated at `at`."""
    terminated = {"terminated": {"exitCode": 0, "finishedAt": rfc(at)}}
    em.edit_object(
        "v1",
        "Pod",
        name,
        ns,
        {"status": {"phase": "Succeeded", "containerStatuses": [{"name": "c", "state": terminated}]}},
    )


@pytest.fixture
def vision(host: HostCluster, admin: Any, kube_emulator: RunningEmulator) -> Tenant:  # noqa: F811
    tenant = lifecycle.create_tenant(actor=Actor.of(admin), slug="vision", host_cluster=host)
    kube_emulator.put_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "tenant-vision"}})
    return tenant


def api_of(em: RunningEmulator) -> KubeApi:
    return KubeApi(api_client_for_url(em.url), FAST)


def one_pass(host: HostCluster, em: RunningEmulator) -> Any:  # noqa: F811
    return live_pass(host, watch_seconds=1, api=api_of(em))


def test_pods_in_tenant_namespaces_are_what_in_use_the_fleet_map_and_what_if_read(
    host: HostCluster,  # noqa: F811
    vision: Tenant,
    kube_emulator: RunningEmulator,
) -> None:
    kube_emulator.put_object(gpu_pod("train-0", "h200-1", gpus=4))
    kube_emulator.put_object(gpu_pod("infer-0", "h200-2", mig="1g.18gb"))
    kube_emulator.put_object(gpu_pod("cpu-only", "h200-2", gpus=0, mig="") | {"spec": {"nodeName": "h200-2"}})
    outcome = one_pass(host, kube_emulator)
    assert outcome.listed

    pods = {p.name: p for p in Pod.objects.filter(host_cluster=host)}
    assert set(pods) == {"train-0", "infer-0"}
    assert pods["train-0"].tenant_id == vision.pk
    assert pods["train-0"].gpu_class.name == "h200-141gb"
    assert len(pods["train-0"].gpu_uuids) == 4
    assert pods["infer-0"].gpu_class.name == "h200-141gb.mig-1g.18gb"
    assert pods["infer-0"].gpu_instance_id is not None
    assert pods["train-0"].started_at == T0

    used = fleet.units_in_use([vision.pk])
    assert used[(vision.pk, "h200-141gb")] == 4
    assert used[(vision.pk, "h200-141gb.mig-1g.18gb")] == 1
    uses = fleet.gpu_uses(host)
    assert sorted(u.state for u in uses.values()).count("allocated") == 4
    assert sorted(u.state for u in uses.values()).count("mig") == 1
    assert {u.tenants for u in uses.values() if u.state != "free"} == {("vision",)}

    model = FleetModel.build(host)
    assert {p.name for p in model.pods} == {"train-0", "infer-0"}
    figures = class_figures([model])
    assert figures["h200-141gb"].allocated == 4
    # 16 GPUs: 4 held whole, 1 partitioned for the MIG pod; capacity and what-if see 11 whole ones free.
    assert figures["h200-141gb"].free == 11
    assert figures["h200-141gb"].largest_free_on_node == 7
    assert figures["h200-141gb.mig-1g.18gb"].allocated == 1
    assert figures["h200-141gb.mig-1g.18gb"].free == 6


def test_a_pod_that_lived_ten_seconds_lasts_ten_seconds_in_the_view(
    host: HostCluster,  # noqa: F811
    vision: Tenant,
    kube_emulator: RunningEmulator,
) -> None:
    one_pass(host, kube_emulator)  # listed empty: the watch goes on from here
    kube_emulator.put_object(gpu_pod("short", "h200-1", gpus=1, start=T0))
    finish(kube_emulator, "short", T0 + timedelta(seconds=10))
    kube_emulator.remove_object("v1", "Pod", "short", "tenant-vision")
    outcome = one_pass(host, kube_emulator)
    assert not outcome.listed

    row = Pod.objects.get(host_cluster=host, name="short")
    assert row.phase == Pod.Phase.SUCCEEDED
    assert row.finished_at is not None
    assert (row.finished_at - row.started_at).total_seconds() == 10
    assert fleet.units_in_use([vision.pk]) == {}


def test_a_lost_watch_relists_and_closes_what_it_missed_once(
    host: HostCluster,  # noqa: F811
    vision: Tenant,
    kube_emulator: RunningEmulator,
) -> None:
    kube_emulator.put_object(gpu_pod("a", "h200-1", gpus=2))
    kube_emulator.put_object(gpu_pod("b", "h200-2", gpus=1))
    one_pass(host, kube_emulator)
    kept = PodWatch.objects.get(host_cluster=host).resource_version

    kube_emulator.remove_object("v1", "Pod", "a", "tenant-vision")  # deleted while nobody watches
    kube_emulator.compact()  # and its event compacted away: the watch answers 410 Gone
    outcome = one_pass(host, kube_emulator)
    assert outcome.listed
    assert PodWatch.objects.get(host_cluster=host).resource_version != kept

    gone = Pod.objects.get(host_cluster=host, name="a")
    assert gone.finished_at is not None, "the list closes what the lost watch missed: no time dropped"
    closed_at = gone.finished_at
    assert Pod.objects.get(host_cluster=host, name="b").finished_at is None

    # A restarted worker (a new view) listing again and replaying writes nothing and closes nothing twice.
    view = LiveView(host)
    items = api_of(kube_emulator).get("/api/v1/pods")
    with CaptureQueriesContext(connection) as queries:
        view.listed(items["items"], items["metadata"]["resourceVersion"])
    writes = [q for q in queries.captured_queries if q["sql"].startswith(("INSERT", "UPDATE", "DELETE"))]
    assert [q["sql"] for q in writes if "workers_simulatedpod" in q["sql"]] == []
    assert Pod.objects.get(host_cluster=host, name="a").finished_at == closed_at


def test_a_resumed_watch_replaying_events_bills_no_pod_twice(
    host: HostCluster,  # noqa: F811
    vision: Tenant,
    kube_emulator: RunningEmulator,
) -> None:
    one_pass(host, kube_emulator)
    start = PodWatch.objects.get(host_cluster=host).resource_version
    kube_emulator.put_object(gpu_pod("c", "h200-1", gpus=1))
    finish(kube_emulator, "c", T0 + timedelta(seconds=95))
    one_pass(host, kube_emulator)
    first = list(Pod.objects.filter(host_cluster=host).values_list("name", "started_at", "finished_at"))

    PodWatch.objects.filter(host_cluster=host).update(resource_version=start)  # the worker died unsaved
    one_pass(host, kube_emulator)  # the same events again
    assert (
        list(Pod.objects.filter(host_cluster=host).values_list("name", "started_at", "finished_at")) == first
    )
    assert first == [("c", T0, T0 + timedelta(seconds=95))]


def test_a_name_that_comes_back_is_a_new_pod(
    host: HostCluster,  # noqa: F811
    vision: Tenant,
    kube_emulator: RunningEmulator,
) -> None:
    one_pass(host, kube_emulator)
    kube_emulator.put_object(gpu_pod("worker-0", "h200-1", gpus=1))
    finish(kube_emulator, "worker-0", T0 + timedelta(seconds=5))
    kube_emulator.remove_object("v1", "Pod", "worker-0", "tenant-vision")
    kube_emulator.put_object(gpu_pod("worker-0", "h200-1", gpus=1, start=T0 + timedelta(seconds=6)))
    one_pass(host, kube_emulator)
    rows = Pod.objects.filter(host_cluster=host, name="worker-0").order_by("started_at")
    assert [(r.started_at, r.finished_at) for r in rows] == [
        (T0, T0 + timedelta(seconds=5)),
        (T0 + timedelta(seconds=6), None),
    ]
    assert [p.name for p in running_pods([host.pk], T0 + timedelta(seconds=7))] == ["worker-0"]


def test_the_portal_shows_the_live_pods_in_quota_bars_the_fleet_map_and_capacity(
    host: HostCluster,  # noqa: F811
    vision: Tenant,
    kube_emulator: RunningEmulator,
    admin: Any,
    client: Any,
) -> None:
    h200 = GpuClass.objects.get(name="h200-141gb")
    quotas.set_quota(actor=Actor.of(admin), tenant=vision, gpu_class=h200, guaranteed=6, burst=2)
    kube_emulator.put_object(gpu_pod("train-0", "h200-1", gpus=4))
    kube_emulator.put_object(gpu_pod("train-1", "h200-2", gpus=1))
    one_pass(host, kube_emulator)
    client.force_login(admin)

    bars = {q.gpu_class.name: b for q, b in client.get("/tenants/vision/quotas/").context["rows"]}
    assert bars["h200-141gb"].used == 5
    counts = dict(client.get("/fleet/").context["counts"])
    assert counts["allocated"] == 5
    assert counts["free"] == 11
    rows = client.get("/capacity/").context["rows"]
    whole = next(r for r, _ in rows if r["host_cluster"] == "gpu-east" and r["gpu_class"] == "h200-141gb")
    assert whole["allocated"] == 5
    assert whole["free"] == 11


def test_metering_bills_a_live_pod_from_its_observed_start_to_the_second(
    host: HostCluster,  # noqa: F811
    vision: Tenant,
    kube_emulator: RunningEmulator,
) -> None:
    """DCGM sees the pod at the 30 s scrape only; the live view says it started at 22 s and ended at
    51 s: 29 GPU-seconds, where half-interval edges alone would bill 30."""
    one_pass(host, kube_emulator)
    kube_emulator.put_object(gpu_pod("edge", "h200-1", gpus=1, start=T0 + timedelta(seconds=22)))
    finish(kube_emulator, "edge", T0 + timedelta(seconds=51))
    one_pass(host, kube_emulator)
    row = Pod.objects.get(host_cluster=host, name="edge")
    uuid, node = row.gpu_uuids[0], "h200-1"

    def scrape(held: bool) -> str:
        pod = "tenant-vision/edge" if held else ""
        return exposition(node, [Row(uuid, model="NVIDIA H200", pod=pod)])

    rounds = [(T0 + timedelta(seconds=t), {node: scrape(t in (30,))}) for t in (0, 30, 60)]
    ingest_rounds(host, rounds, facts=pod_facts(host, T0 + timedelta(seconds=60), 120))
    billed = UsageEntry.objects.filter(pod="edge").aggregate(s=Sum("gpu_us"))["s"]
    assert billed == 29 * 10**6
    assert (
        UsageEntry.objects.filter(pod="edge").values_list("tenant_id", flat=True).distinct().get()
        == vision.pk
    )


def test_the_periodic_pass_asks_one_live_pass_per_kubernetes_host_cluster(
    host: HostCluster,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    HostCluster.objects.create(name="sim", driver=HostCluster.Driver.SIMULATED)
    asked: list[tuple[str, tuple[Any, ...]]] = []
    monkeypatch.setattr(tasks, "enqueue", lambda name, *args, **kw: asked.append((name, args)))
    tasks.live_pass_all()
    assert asked == [(names.LIVE_PASS, (host.pk,))]


def test_the_live_pass_task_reaches_the_host_cluster_with_its_kubeconfig(
    host: HostCluster,  # noqa: F811
    vision: Tenant,
    kube_emulator: RunningEmulator,
    settings: Any,
) -> None:
    settings.LIVE_WATCH_SECONDS = 1
    kube_emulator.put_object(gpu_pod("train-0", "h200-2", gpus=8))
    tasks.live_pass(host.pk)
    assert fleet.units_in_use([vision.pk]) == {(vision.pk, "h200-141gb"): 8}
    assert PodWatch.objects.get(host_cluster=host).listed_at is not None


def test_a_pod_that_lived_ten_seconds_between_two_scrapes_is_billed_ten_seconds_once(
    host: HostCluster,  # noqa: F811
    vision: Tenant,
    kube_emulator: RunningEmulator,
) -> None:
    one_pass(host, kube_emulator)
    kube_emulator.put_object(gpu_pod("blink", "h200-1", gpus=1, start=T0 + timedelta(seconds=5)))
    finish(kube_emulator, "blink", T0 + timedelta(seconds=15))
    kube_emulator.remove_object("v1", "Pod", "blink", "tenant-vision")
    one_pass(host, kube_emulator)
    uuid = Pod.objects.get(host_cluster=host, name="blink").gpu_uuids[0]
    idle = exposition("h200-1", [Row(uuid, model="NVIDIA H200")])  # DCGM never sees the pod
    rounds = [(T0 + timedelta(seconds=t), {"h200-1": idle}) for t in (0, 30)]

    for _ in range(2):  # the round ingested again (a replay, a retried task) adds nothing
        ingest_rounds(host, rounds, facts=pod_facts(host, T0 + timedelta(seconds=30), 120))
    billed = UsageEntry.objects.filter(pod="blink").aggregate(s=Sum("gpu_us"))["s"]
    assert billed == 10 * 10**6


def test_mig_pods_of_two_profiles_take_two_gpus_and_what_if_books_both(
    host: HostCluster,  # noqa: F811
    vision: Tenant,
    kube_emulator: RunningEmulator,
) -> None:
    for name, mig in (("a", "1g.18gb"), ("b", "3g.71gb"), ("c", "1g.18gb")):
        kube_emulator.put_object(gpu_pod(name, "h200-1", mig=mig))
    one_pass(host, kube_emulator)
    pods = {p.name: p for p in Pod.objects.filter(host_cluster=host)}
    assert pods["a"].gpu_uuids == pods["c"].gpu_uuids
    assert pods["a"].gpu_instance_id != pods["c"].gpu_instance_id
    assert pods["b"].gpu_uuids != pods["a"].gpu_uuids
    figures = class_figures([FleetModel.build(host)])
    assert figures["h200-141gb.mig-1g.18gb"].allocated == 2
    assert figures["h200-141gb.mig-3g.71gb"].allocated == 1
    assert figures["h200-141gb"].free == 14
