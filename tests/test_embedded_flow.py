"""The README's flow, end to end: HTTP API → services → Redis → a real Celery worker → simulated cluster."""

import time

import pytest

from tenants.models import Tenant

pytestmark = pytest.mark.worker


def wait_for(fetch, predicate, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = fetch()
        if predicate(value):
            return value
        time.sleep(0.1)
    raise AssertionError(f"gave up after {timeout} s; last seen: {value}")


def test_a_tenant_comes_up_gets_quota_and_goes_away(api, admin, demo_fleet, celery_worker, settings):
    settings.SIMULATED_PROVISION_DELAY = 1.0
    settings.SIMULATED_DELETE_DELAY = 0.5
    settings.REQUEUE_DELAY = 0.2
    client = api(admin)

    started = time.monotonic()
    assert client.post("/api/v1/tenants/", {"slug": "vision"}, format="json").status_code == 201
    tenant = wait_for(
        lambda: client.get("/api/v1/tenants/vision/").json(), lambda t: t["state"] == "ready", 10
    )
    assert time.monotonic() - started < 10
    assert tenant["cluster"]["state"] == "ready"
    assert tenant["cluster"]["endpoint"]

    assert (
        client.put("/api/v1/tenants/vision/quotas/h200-141gb/", {"guaranteed": 8}, format="json").status_code
        == 201
    )
    too_much = client.put("/api/v1/tenants/vision/quotas/a100-80gb/", {"guaranteed": 41}, format="json")
    assert too_much.status_code == 422
    assert (too_much.json()["capacity"], too_much.json()["requested"]) == (
        40,
        41,
    )
    capacity = {
        row["gpu_class"]: row for row in client.get("/api/v1/fleet/capacity/?limit=500").json()["results"]
    }
    assert (capacity["h200-141gb"]["guaranteed"], capacity["h200-141gb"]["available"]) == (8, 56)

    assert client.delete("/api/v1/tenants/vision/").status_code == 202
    wait_for(lambda: client.get("/api/v1/tenants/vision/").json(), lambda t: t["state"] == "deleted", 10)
    capacity = {
        row["gpu_class"]: row for row in client.get("/api/v1/fleet/capacity/?limit=500").json()["results"]
    }
    assert (capacity["h200-141gb"]["guaranteed"], capacity["h200-141gb"]["available"]) == (0, 64)
    assert Tenant.objects.get(slug="vision").cluster.state == "deleted"
