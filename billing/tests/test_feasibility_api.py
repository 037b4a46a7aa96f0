"""POST /tenants/{slug}/feasibility/ and GET /tenants/{slug}/queue/: every role reads, price only to those who
may see cost, another tenant is not found, bad input is a 400 naming the field (problem+json)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from billing.services import rates
from clusters.models import ObservedWorkload
from core.audit import Actor
from fleet.models import Gpu, GpuClass, PendingWorkload
from tenants.services import quotas


@pytest.fixture
def a(people):
    admin = Actor.of(people["admin"])
    quotas.set_quota(
        actor=admin,
        tenant=people["a"],
        gpu_class=GpuClass.objects.get(name="h200-141gb"),
        guaranteed=4,
        burst=2,
    )
    rates.create_rate_card(
        actor=admin,
        effective_from=datetime(2026, 1, 1, tzinfo=UTC),
        prices={"h200-141gb": "2.50"},
        tier_multipliers={"standard": "1.2"},
    )
    return people["a"]


def ask(client, body, slug="tenant-a"):
    return client.post(f"/api/v1/tenants/{slug}/feasibility/", body, format="json")


def test_an_owner_sees_where_and_at_what_price(api, people, a):
    response = ask(api(people["alice"]), {"gpu_class": "h200-141gb", "count": 2, "hours": 3})

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["fits_now"] is True
    assert body["reason"] == "fits now"
    assert body["host_cluster"] == "demo"
    assert len(body["nodes"]) == 1
    assert body["quota"] == {
        "guaranteed": 4,
        "burst": 2,
        "in_use": 0,
        "ahead": 0,
        "from_guarantee": 2,
        "borrowed": 0,
    }
    # 2.50 × 1.2 (standard tier) × 2 GPUs × 3 hours
    assert body["price"] == {
        "per_unit_hour": "3.000000",
        "total": "18.00",
        "currency": "USD",
        "rate_card_version": 1,
    }


def test_a_viewer_gets_the_answer_without_the_price(api, people, a):
    response = ask(api(people["bob"]), {"gpu_class": "h200-141gb", "count": 5, "hours": 1})

    assert response.status_code == 200
    assert response.json()["price"] is None
    assert response.json()["quota"]["borrowed"] == 1  # 5 on a guarantee of 4


def test_over_quota_is_an_answer_not_an_error(api, people, a):
    body = ask(api(people["alice"]), {"gpu_class": "h200-141gb", "count": 7, "hours": 1}).json()

    assert body["estimated_start"] is None
    assert body["reason"] == "quota exceeded: asks 7 × h200-141gb, guarantee + burst is 6"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"gpu_class": "nope", "count": 1, "hours": 1}, "gpu_class"),
        ({"gpu_class": "h200-141gb", "count": -1, "hours": 1}, "count"),
        ({"gpu_class": "h200-141gb", "count": 1, "hours": 0}, "hours"),
        ({"gpu_class": "h200-141gb", "count": "x", "hours": 1}, "count"),
    ],
)
def test_bad_input_is_a_400_naming_the_field(api, people, a, body, field):
    response = ask(api(people["alice"]), body)

    assert response.status_code == 400, response.content
    assert field in str(response.json())


def test_another_tenant_is_not_found(api, people, a):
    assert ask(api(people["charlie"]), {"gpu_class": "h200-141gb", "count": 1, "hours": 1}).status_code == 404
    assert api(people["charlie"]).get("/api/v1/tenants/tenant-a/queue/").status_code == 404


def test_the_queue_lists_pending_workloads_in_order(api, people, a):
    now = timezone.now()
    for name, gpus, age in (("second", 2, 5), ("first", 4, 10), ("huge", 9, 1)):
        PendingWorkload.objects.create(
            tenant=a,
            host_cluster_id=a.cluster.host_cluster_id,
            namespace=a.cluster.namespace,
            name=name,
            queue="default",
            gpus=gpus,
            gpu_class="h200-141gb",
            created_at=now - timedelta(minutes=age),
        )
    ObservedWorkload.objects.create(
        tenant=a, name="running", state="admitted", gpus=1, gpu_class="h200-141gb"
    )

    body = api(people["bob"]).get("/api/v1/tenants/tenant-a/queue/").json()["results"]

    assert [(w["name"], w["position"]) for w in body] == [("first", 1), ("second", 2), ("huge", 3)]
    assert body[0]["reason"] == "fits now: waiting for Kueue to admit it"
    assert body[0]["estimated_start"] is not None
    # "second" takes 2 more: 4 + 2 is within guarantee 4 + burst 2, and the fleet is idle.
    assert body[1]["estimated_start"] is not None
    assert body[2]["reason"] == "quota exceeded: asks 9 × h200-141gb, guarantee + burst is 6"
    assert body[2]["estimated_start"] is None


def test_the_console_commands(people, a):
    PendingWorkload.objects.create(
        tenant=a,
        host_cluster_id=a.cluster.host_cluster_id,
        namespace=a.cluster.namespace,
        name="waits",
        queue="default",
        gpus=9,
        gpu_class="h200-141gb",
    )
    out = StringIO()
    call_command(
        "feasibility", "tenant-a", "--class", "h200-141gb", "--count", "2", "--hours", "1", stdout=out
    )
    answer = json.loads(out.getvalue())
    lines = StringIO()
    call_command("tenant_queue", "tenant-a", stdout=lines)

    assert answer["fits_now"] is True
    assert answer["price"]["total"] == "6.00"
    assert lines.getvalue().strip() == (
        "1. waits  9 × h200-141gb  starts: not within a week  — quota exceeded: asks 9 × h200-141gb,"
        " guarantee + burst is 6"
    )
    with pytest.raises(CommandError, match="count is 1 to 1024"):
        call_command("feasibility", "tenant-a", "--class", "h200-141gb", "--count", "0", "--hours", "1")
    with pytest.raises(CommandError, match="no tenant 'nobody'"):
        call_command("tenant_queue", "nobody")


def test_the_ask_goes_behind_the_tenants_waiting_workloads(api, people, a):
    PendingWorkload.objects.create(
        tenant=a,
        host_cluster_id=a.cluster.host_cluster_id,
        namespace=a.cluster.namespace,
        name="first",
        queue="default",
        gpus=5,
        gpu_class="h200-141gb",
    )

    body = ask(api(people["alice"]), {"gpu_class": "h200-141gb", "count": 2, "hours": 1}).json()

    # 5 queued before it of a guarantee of 4 + burst 2: the 2 asked must wait until "first" ends, whose
    # runtime is unknown (no finished pod of the class yet): not within a week.
    assert body["quota"]["ahead"] == 5
    assert body["estimated_start"] is None
    assert body["reason"] == (
        "the tenant's quota of h200-141gb is full (0 in use, 5 queued before it, guarantee + burst 6) and"
        " those are not expected to end within 7 days"
    )


def test_another_tenants_workload_ahead_delays_the_estimate(api, people, a):
    """The replay holds every tenant's waiting workloads of the host cluster, not the tenant's own only."""
    total = Gpu.objects.filter(
        gpu_model__slug="h200-141gb", node__host_cluster=a.cluster.host_cluster
    ).count()
    quotas.set_quota(
        actor=Actor.of(people["admin"]),
        tenant=people["b"],
        gpu_class=GpuClass.objects.get(name="h200-141gb"),
        guaranteed=total - 4,
        burst=0,
    )
    now = timezone.now()
    b = people["b"]
    PendingWorkload.objects.create(  # b's, of higher priority, takes every GPU but a's guarantee for 2 h
        tenant=b,
        host_cluster_id=b.cluster.host_cluster_id,
        namespace=b.cluster.namespace,
        name="big",
        gpus=total - 4,
        gpu_class="h200-141gb",
        priority=10,
        expected_seconds=7200,
        created_at=now,
    )
    PendingWorkload.objects.create(  # a's asks 5: more than the 4 b leaves free
        tenant=a,
        host_cluster_id=a.cluster.host_cluster_id,
        namespace=a.cluster.namespace,
        name="five",
        gpus=5,
        gpu_class="h200-141gb",
        created_at=now - timedelta(minutes=5),
    )

    body = api(people["bob"]).get("/api/v1/tenants/tenant-a/queue/").json()["results"]

    assert [w["name"] for w in body] == ["five"]  # b's workload is not shown to a
    start = datetime.fromisoformat(body[0]["estimated_start"])
    assert timedelta(hours=2) <= start - now < timedelta(hours=2, minutes=2)
