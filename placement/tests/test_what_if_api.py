"""POST /api/v1/fleet/what-if/: would these quotas or this gang fit now, and where? And fleet/capacity's
engine figures."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from core.audit import Actor
from fleet.models import Gpu, GpuClass, Node, Pod
from placement.dedication import dedicate_nodes
from tenants.services import lifecycle
from tenants.services.quotas import set_quota

URL = "/api/v1/fleet/what-if/"


@pytest.fixture
def make_tenant(admin, demo_fleet):
    """tests/fixtures.py's tenant maker, which this directory's conftest shadows with one of plain specs."""

    def make(slug, **kwargs):
        return lifecycle.create_tenant(actor=Actor.of(admin), slug=slug, **kwargs)

    return make


def gang(**kwargs):
    return {"gang": {"pods": 2, "gpus_per_pod": 8, "gpu_class": "h200-141gb", **kwargs}}


def hold(tenant, node, indices, gpu_class="h200-141gb"):
    """A running simulated pod of `tenant` holding whole GPUs of `node`."""
    gpus = Gpu.objects.filter(node__name=node, index__in=indices).order_by("index")
    return Pod.objects.create(
        host_cluster=Node.objects.get(name=node).host_cluster,
        tenant=tenant,
        namespace=f"tenant-{tenant.slug}",
        name=f"held-{node}-{indices[0]}",
        gpu_class=GpuClass.objects.get(name=gpu_class),
        node=Node.objects.get(name=node),
        gpu_uuids=[g.uuid for g in gpus],
        started_at=timezone.now() - timedelta(minutes=5),
    )


def test_a_gang_that_fits_is_answered_with_its_nodes_and_its_domain(api, people):
    response = api(people["alice"]).post(
        URL, gang(topology={"level": "nvlink", "mode": "required"}), format="json"
    )

    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["kind"] == "gang"
    assert body["fits"] is True
    assert body["host_cluster"] == "demo"
    assert [n["units"] for n in body["nodes"]] == [8, 8]
    assert body["domain"]["level"] == "nvlink"
    assert body["domain"]["name"].startswith("zone-a/block-1/rack-")
    assert body["topology"] == {"level": "nvlink", "mode": "required"}


def test_a_gang_larger_than_any_nvlink_domain_fits_only_when_the_level_is_preferred(api, people):
    client = api(people["alice"])

    required = client.post(URL, gang(pods=5, topology={"level": "nvlink", "mode": "required"}), format="json")
    preferred = client.post(
        URL, gang(pods=5, topology={"level": "nvlink", "mode": "preferred"}), format="json"
    )

    assert required.status_code == 200
    assert required.json()["fits"] is False
    assert required.json()["nodes"] == []
    assert preferred.json()["fits"] is True
    assert preferred.json()["domain"]["level"] == "block"


def test_running_pods_and_quarantined_hardware_shrink_what_fits(api, people):
    for n in range(3):
        hold(people["b"], f"h200-r1-{n}", [0])
    Node.objects.filter(name="h200-r2-0").update(state=Node.State.QUARANTINED)
    client = api(people["alice"])

    four = client.post(
        URL, gang(pods=4, topology={"level": "rack", "mode": "required"}), format="json"
    ).json()
    three = client.post(
        URL, gang(pods=3, topology={"level": "rack", "mode": "required"}), format="json"
    ).json()

    assert four["fits"] is False
    assert three["fits"] is True
    assert {n["node"] for n in three["nodes"]} == {
        "h200-r2-1",
        "h200-r2-2",
        "h200-r2-3",
    }


def test_an_impossible_gang_is_a_clear_400(api, people):
    response = api(people["alice"]).post(URL, gang(gpus_per_pod=16), format="json")

    assert response.status_code == 400
    body = response.json()
    assert body["type"] == "/problems/invalid-request"
    assert "never fit" in body["detail"]
    assert "largest node has 8 GPUs" in body["detail"]


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        (gang(gpu_class="h900"), "gang.gpu_class", "unknown GPU class 'h900'"),
        (gang(gpu_class="h200-141gb.mig-1g.18gb"), "gang.gpu_class", "not MIG slices"),
        (gang(topology={"level": "galaxy"}), "gang.topology.level", "galaxy"),
        ({"quotas": [{"gpu_class": "nope", "guaranteed": 1}]}, "quotas[0].gpu_class", "unknown GPU class"),
        ({"quotas": []}, "quotas", "at least one"),
        (
            {**gang(), "quotas": [{"gpu_class": "h200-141gb", "guaranteed": 1}]},
            "_",
            "either quotas or a gang",
        ),
    ],
)
def test_bad_input_is_a_problem_naming_the_field(api, people, body, field, words):
    response = api(people["alice"]).post(URL, body, format="json")

    assert response.status_code == 400, response.json()
    errors = response.json()["errors"]
    assert field in errors
    assert words in " ".join(errors[field])


def test_quotas_that_fit_next_to_running_pods_are_answered_per_line(api, people):
    hold(people["b"], "h200-r1-0", list(range(8)))
    quotas = [
        {"tenant": "tenant-a", "gpu_class": "h200-141gb", "guaranteed": 48},
        {"trust_tier": "trusted", "gpu_class": "h200-141gb.shared", "guaranteed": 20},
        {"gpu_class": "a100-80gb.mig-1g.10gb", "guaranteed": 10},
    ]

    body = api(people["alice"]).post(URL, {"quotas": quotas}, format="json").json()

    assert body["kind"] == "quotas"
    assert body["fits"] is True
    lines = body["quotas"]
    assert [q["placeable"] for q in lines] == [48, 20, 10]
    assert lines[0]["tenant"] == "tenant-a"
    assert lines[1]["tenant"] is None
    assert lines[1]["trust_tier"] == "trusted"
    assert sum(n["units"] for n in lines[0]["nodes"]) == 48
    assert sum(n["units"] for n in lines[2]["nodes"]) == 10, "MIG units, on idle GPUs laid out anew"
    assert "h200-r1-0" not in {n["node"] for n in lines[0]["nodes"]}


def test_quotas_beyond_what_is_free_do_not_fit_and_say_how_much_would(api, people):
    hold(people["b"], "h200-r1-0", list(range(8)))

    body = (
        api(people["alice"])
        .post(
            URL,
            {"quotas": [{"tenant": "tenant-a", "gpu_class": "h200-141gb", "guaranteed": 60}]},
            format="json",
        )
        .json()
    )

    assert body["fits"] is False
    assert body["quotas"][0]["placeable"] == 56


def test_an_isolated_quota_needs_whole_empty_nodes(api, people):
    for n in range(8):
        hold(people["b"], f"h200-r{1 + n // 4}-{n % 4}", [7])
    client = api(people["alice"])

    isolated = {"trust_tier": "isolated", "gpu_class": "h200-141gb", "guaranteed": 8}
    standard = {"trust_tier": "standard", "gpu_class": "h200-141gb", "guaranteed": 8}

    assert client.post(URL, {"quotas": [isolated]}, format="json").json()["fits"] is False
    assert client.post(URL, {"quotas": [standard]}, format="json").json()["fits"] is True


def test_a_member_may_ask_about_their_tenant_but_not_about_another(api, people):
    ask = {"quotas": [{"tenant": "tenant-a", "gpu_class": "h200-141gb", "guaranteed": 8}]}

    assert api(people["alice"]).post(URL, ask, format="json").status_code == 200
    assert api(people["bob"]).post(URL, ask, format="json").status_code == 200
    refused = api(people["charlie"]).post(URL, ask, format="json")
    assert refused.status_code == 404
    assert "tenant-a" in refused.json()["detail"]
    gang_ask = gang(tenant="tenant-a")
    assert api(people["charlie"]).post(URL, gang_ask, format="json").status_code == 404
    assert api(people["admin"]).post(URL, gang_ask, format="json").status_code == 200
    assert api(None).post(URL, ask, format="json").status_code == 401


def test_answers_name_nodes_and_counts_but_never_other_tenants(api, people):
    hold(people["a"], "h200-r1-0", list(range(8)))
    response = api(people["charlie"]).post(URL, gang(pods=4, topology={"level": "rack"}), format="json")

    text = response.content.decode()
    assert response.status_code == 200
    assert "tenant-a" not in text
    assert "held-" not in text


def test_a_named_tenant_with_another_trust_tier_is_refused(api, people):
    ask = {
        "quotas": [
            {"tenant": "tenant-a", "trust_tier": "trusted", "gpu_class": "h200-141gb", "guaranteed": 1}
        ]
    }

    response = api(people["alice"]).post(URL, ask, format="json")

    assert response.status_code == 400
    assert "tenant-a is standard" in response.json()["detail"]


def test_fleet_capacity_shows_what_running_pods_hold_and_the_largest_free_blocks(api, people):
    hold(people["a"], "h200-r1-0", [0, 1, 2])
    Gpu.objects.filter(node__name="h200-r2-0", index=0).update(health=Gpu.Health.QUARANTINED)

    rows = api(people["bob"]).get("/api/v1/fleet/capacity/?gpu_model=h200-141gb").json()["results"]

    h200 = next(r for r in rows if r["gpu_class"] == "h200-141gb")
    assert (h200["capacity"], h200["guaranteed"], h200["available"]) == (63 * 1, 0, 63)
    assert (h200["allocated"], h200["free"]) == (3, 64 - 3 - 1)
    assert h200["largest_free_on_node"] == 8
    assert h200["largest_free_in_nvlink_domain"] == 32 - 1
    shared = next(r for r in rows if r["gpu_class"] == "h200-141gb.shared")
    assert shared["allocated"] == 0
    assert shared["free"] == 60 * 4


def test_fleet_capacity_counts_mig_instances_of_the_planned_layouts(api, people, admin):
    set_quota(
        actor=Actor.of(admin),
        tenant=people["a"],
        gpu_class=GpuClass.objects.get(name="h200-141gb.mig-3g.71gb"),
        guaranteed=4,
    )

    rows = api(people["alice"]).get("/api/v1/fleet/capacity/?gpu_model=h200-141gb").json()["results"]

    by_class = {r["gpu_class"]: r for r in rows}
    assert by_class["h200-141gb.mig-3g.71gb"]["free"] == 4
    assert by_class["h200-141gb.mig-3g.71gb"]["largest_free_on_node"] == 4, "MIG GPUs gather on one node"
    assert by_class["h200-141gb"]["free"] == 64 - 2
    assert by_class["h200-141gb.mig-1g.18gb"]["free"] == 0


def test_nodes_dedicated_to_an_isolated_tenant_are_not_free_to_others(api, people, make_tenant, admin):
    solo = make_tenant("solo", trust_tier="isolated")
    set_quota(
        actor=Actor.of(admin), tenant=solo, gpu_class=GpuClass.objects.get(name="h200-141gb"), guaranteed=12
    )
    dedicate_nodes(solo.cluster.host_cluster)  # as the reconcile the quota change enqueues does

    rows = api(people["alice"]).get("/api/v1/fleet/capacity/?gpu_model=h200-141gb").json()["results"]

    h200 = next(r for r in rows if r["gpu_class"] == "h200-141gb")
    assert (h200["guaranteed"], h200["free"]) == (12, 64 - 16), "a pool of two whole nodes"
    assert (h200["dedicated_gpus"], h200["available"]) == (16, 64 - 16), "admission counts them whole too"
