"""Health events, the fleet's nodes and releases through the API; release by a clean window, with back-off."""

from __future__ import annotations

from datetime import timedelta

import pytest

from billing.services.ingest import ingest_scrape
from billing.tests.conftest import T0, Row, at, exposition, gpu_uuid
from core.audit import Actor
from core.models import AuditEvent
from fleet.models import Gpu, GpuClass
from gpucloud.errors import CapacityExceeded
from health.models import HealthEvent, Quarantine
from health.services import quarantines
from tenants.services import quotas

ADMIN = Actor.console("tests")


def round_(mini, t: float, xid: dict[int, int] | None = None, pods: dict[int, str] | None = None) -> None:
    """One scrape of h100-0 (4 × H100, every GPU listed), XIDs and pods where asked."""
    text = exposition(
        "h100-0", [Row(gpu_uuid("h100-0", i), index=i, pod=(pods or {}).get(i, "")) for i in range(4)]
    )
    for index, code in (xid or {}).items():
        labels = f'gpu="{index}",UUID="{gpu_uuid("h100-0", index)}",hostname="h100-0"'
        text += f"DCGM_FI_DEV_XID_ERRORS{{{labels}}} {code}\n"
    ingest_scrape(mini, "h100-0", at(t), text)


@pytest.fixture
def faulty(mini, people):
    """tenant-a's pod on H100 0 dies with XID 79 (credited); XID 13 on H100 2 is the application's."""
    cluster = people["a"].cluster
    cluster.host_cluster = mini
    cluster.save()
    round_(mini, 0, pods={0: "tenant-tenant-a/train"})
    round_(mini, 30, pods={0: "tenant-tenant-a/train"})
    round_(mini, 60, xid={0: 79, 2: 13}, pods={0: "tenant-tenant-a/train"})
    return people


def ids(response) -> list[str]:
    assert response.status_code == 200, response.json()
    return [e["id"] for e in response.json()["results"]]


def test_platform_admins_list_every_event_with_filters(api, faulty):
    admin = api(faulty["admin"])
    fatal = HealthEvent.objects.get(signal="xid", value="79")
    app = HealthEvent.objects.get(signal="xid", value="13")
    assert sorted(ids(admin.get("/api/v1/health-events/"))) == sorted([fatal.public_id, app.public_id])
    assert ids(admin.get("/api/v1/health-events/?severity=fatal")) == [fatal.public_id]
    assert ids(admin.get(f"/api/v1/health-events/?gpu={gpu_uuid('h100-0', 2)}")) == [app.public_id]
    assert len(ids(admin.get("/api/v1/health-events/?host_cluster=mini&node=h100-0&state=open"))) == 2
    assert ids(admin.get("/api/v1/health-events/?state=closed")) == []
    assert ids(admin.get("/api/v1/health-events/?node=a100-0")) == []
    body = admin.get(f"/api/v1/health-events/{fatal.public_id}/").json()
    assert (body["gpu"], body["gpu_index"], body["severity"], body["state"]) == (
        gpu_uuid("h100-0", 0),
        0,
        "fatal",
        "open",
    )
    bad = admin.get("/api/v1/health-events/?severity=dire")
    assert bad.status_code == 400
    assert "severity" in str(bad.json())
    assert admin.get("/api/v1/health-events/?state=maybe").status_code == 400


def test_a_tenant_sees_the_events_that_cost_it_time_and_nothing_of_anyone_else(api, faulty):
    fatal = HealthEvent.objects.get(signal="xid", value="79")
    assert ids(api(faulty["alice"]).get("/api/v1/health-events/")) == [fatal.public_id]
    assert ids(api(faulty["bob"]).get("/api/v1/health-events/")) == [fatal.public_id]
    assert ids(api(faulty["charlie"]).get("/api/v1/health-events/")) == []
    assert api(faulty["charlie"]).get(f"/api/v1/health-events/{fatal.public_id}/").status_code == 404


def test_the_nodes_of_a_host_cluster_show_each_gpu_its_health_and_why_it_is_out(api, faulty):
    response = api(faulty["admin"]).get("/api/v1/host-clusters/mini/nodes/")
    assert response.status_code == 200
    node = next(n for n in response.json()["results"] if n["name"] == "h100-0")
    gpus = {g["index"]: g for g in node["gpus"]}
    assert (gpus[0]["uuid"], gpus[0]["model"], gpus[0]["health"]) == (
        gpu_uuid("h100-0", 0),
        "h100-80gb",
        "quarantined",
    )
    assert gpus[0]["state"] == "quarantined"
    assert gpus[0]["quarantine"]["reason"] == "xid-79"
    assert [e["signal"] for e in gpus[0]["open_events"]] == ["xid"]
    assert (gpus[2]["health"], gpus[2]["open_events"][0]["severity"]) == ("healthy", "info")
    assert gpus[1] == {**gpus[1], "health": "healthy", "quarantine": None, "open_events": []}
    assert api(faulty["alice"]).get("/api/v1/host-clusters/mini/nodes/").status_code == 403
    assert api(faulty["admin"]).get("/api/v1/host-clusters/nowhere/nodes/").status_code == 404


def test_capacity_counts_the_gpus_out_and_says_why(api, faulty):
    rows = api(faulty["alice"]).get("/api/v1/fleet/capacity/?host_cluster=mini&gpu_model=h100-80gb").json()
    whole = next(r for r in rows["results"] if r["gpu_class"] == "h100-80gb")
    reasons = {"xid-79": 1}
    assert (whole["healthy_gpus"], whole["quarantined_gpus"], whole["quarantine_reasons"]) == (3, 1, reasons)
    assert (whole["capacity"], whole["free"]) == (3, 3)  # admission and the placement engine leave it out
    h100 = GpuClass.objects.get(name="h100-80gb")
    with pytest.raises(CapacityExceeded, match="healthy capacity there is 3"):
        quotas.set_quota(actor=ADMIN, tenant=faulty["a"], gpu_class=h100, guaranteed=4)
    quotas.set_quota(actor=ADMIN, tenant=faulty["a"], gpu_class=h100, guaranteed=3)


def test_a_platform_admin_releases_a_gpu_and_it_is_audited(api, faulty, mini):
    admin = api(faulty["admin"])
    url = "/api/v1/host-clusters/mini/nodes/h100-0/release/"
    assert api(faulty["alice"]).post(url, {"gpu": 0}, format="json").status_code == 403
    assert admin.post(url, {"gpu": 9}, format="json").status_code == 400
    assert admin.post(url, {"gpu": -1}, format="json").status_code == 400
    assert (
        admin.post("/api/v1/host-clusters/mini/nodes/nowhere/release/", {}, format="json").status_code == 404
    )
    assert admin.post(url, {}, format="json").status_code == 409  # the node itself is not out
    response = admin.post(url, {"gpu": 0, "reason": "GPU reseated"}, format="json")
    assert response.status_code == 200, response.json()
    assert Gpu.objects.get(uuid=gpu_uuid("h100-0", 0)).health == Gpu.Health.HEALTHY
    entry = AuditEvent.objects.get(action="gpu.release")
    assert (entry.actor_label, entry.after["why"]) == ("admin (token test)", "GPU reseated")
    assert admin.post(url, {"gpu": 0}, format="json").status_code == 409
    # the XID is still reported: the next round takes it out again
    round_(mini, 90, xid={0: 79})
    assert Gpu.objects.get(uuid=gpu_uuid("h100-0", 0)).health == Gpu.Health.QUARANTINED


def test_a_clean_window_releases_a_gpu_and_a_flapping_one_waits_twice_as_long(mini, settings):
    settings.HEALTH_EVENT_CLEAR_AFTER = 60
    settings.HEALTH_CLEAN_WINDOW = 600
    round_(mini, 0)
    round_(mini, 30, xid={1: 48})
    gpu = Gpu.objects.get(uuid=gpu_uuid("h100-0", 1))
    assert gpu.health == Gpu.Health.QUARANTINED
    for t in range(60, 630, 30):  # reset: the XID reads 0 again
        round_(mini, t)
    event = HealthEvent.objects.get(gpu=gpu)
    assert event.closed_at == at(90)  # clean for HEALTH_EVENT_CLEAR_AFTER
    gpu.refresh_from_db()
    assert gpu.health == Gpu.Health.QUARANTINED  # 600 s clean from the last fault at 30 s: not yet at 600
    round_(mini, 630)
    gpu.refresh_from_db()
    assert gpu.health == Gpu.Health.HEALTHY
    assert AuditEvent.objects.get(action="gpu.release").actor_label == "system:health"

    round_(mini, 660, xid={1: 48})  # back again: the second quarantine within a day needs 1200 s
    q = Quarantine.objects.get(gpu=gpu, released_at=None)
    assert quarantines.required_clean(q) == timedelta(seconds=1200)
    for t in range(690, 1860, 30):
        round_(mini, t)
    assert Gpu.objects.get(pk=gpu.pk).health == Gpu.Health.QUARANTINED
    round_(mini, 1860)
    assert Gpu.objects.get(pk=gpu.pk).health == Gpu.Health.HEALTHY
    assert HealthEvent.objects.filter(gpu=gpu).count() == 2


def test_an_application_xid_after_a_reset_ends_the_fatal_event_and_lets_the_gpu_come_back(mini, settings):
    settings.HEALTH_EVENT_CLEAR_AFTER = 0
    settings.HEALTH_CLEAN_WINDOW = 60
    round_(mini, 0)
    round_(mini, 30, xid={1: 79})
    round_(mini, 60, xid={1: 13})  # reset, then the application faulted: the last XID now reads 13
    fatal, app = HealthEvent.objects.order_by("id")
    assert (fatal.value, fatal.closed_at, app.value, app.severity, app.closed_at) == (
        "79",
        at(60),
        "13",
        "info",
        None,
    )
    round_(mini, 90, xid={1: 13})
    assert Gpu.objects.get(uuid=gpu_uuid("h100-0", 1)).health == Gpu.Health.HEALTHY  # 60 s clean since 30 s


def test_the_same_round_ingested_twice_moves_no_event(mini):
    round_(mini, 0)
    round_(mini, 30, xid={3: 79})
    before = list(HealthEvent.objects.values_list("first_seen", "last_seen", "occurrences"))
    round_(mini, 30, xid={3: 79})
    assert list(HealthEvent.objects.values_list("first_seen", "last_seen", "occurrences")) == before
    assert before == [(T0 + timedelta(seconds=30), T0 + timedelta(seconds=30), 1)]


def test_the_nodes_view_shows_the_mig_layout_in_use(api, admin, mini, make_pod):
    pod = make_pod("infer", "tenant-x", "a100-80gb.mig-3g.40gb", "a100-0", [1], at(-60), gi=1)
    pod.mig_layout = ["3g.40gb", "3g.40gb"]
    pod.save()
    nodes = api(admin).get("/api/v1/host-clusters/mini/nodes/").json()["results"]
    gpus = {g["index"]: g for g in next(n for n in nodes if n["name"] == "a100-0")["gpus"]}
    assert (gpus[1]["mig_layout"], gpus[1]["state"]) == (["3g.40gb", "3g.40gb"], "mig")
    assert gpus[0]["mig_layout"] == []
