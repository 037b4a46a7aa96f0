"""The tenants API: scoping, problem responses, pagination and idempotent POSTs."""

from tenants.models import Tenant


def test_the_flow_of_the_readme_through_the_api(api, admin, demo_fleet):
    client = api(admin)
    created = client.post("/api/v1/tenants/", {"slug": "vision", "display_name": "Vision"}, format="json")
    assert created.status_code == 201, created.json()
    assert created.json()["cluster"]["namespace"] == "tenant-vision"

    quota = client.put("/api/v1/tenants/vision/quotas/h200-141gb/", {"guaranteed": 8}, format="json")
    assert quota.status_code == 201
    assert quota.json()["guaranteed"] == 8

    refused = client.put("/api/v1/tenants/vision/quotas/h200-141gb/", {"guaranteed": 65}, format="json")
    assert refused.status_code == 422
    assert refused["Content-Type"] == "application/problem+json"
    body = refused.json()
    assert (body["capacity"], body["guaranteed"], body["requested"], body["available"]) == (64, 0, 65, 64)
    assert body["type"] == "/problems/quota-exceeds-capacity"
    assert body["instance"].endswith("h200-141gb/")

    capacity = client.get("/api/v1/fleet/capacity/?gpu_model=h200-141gb").json()["results"]
    assert {"gpu_class": "h200-141gb", "capacity": 64, "guaranteed": 8, "available": 56}.items() <= capacity[
        0
    ].items()

    deleted = client.delete("/api/v1/tenants/vision/")
    assert deleted.status_code == 202
    assert deleted.json()["state"] == "deleting"


def test_another_tenants_objects_are_not_found(api, people):
    charlie = api(people["charlie"])
    for path in (
        "/api/v1/tenants/tenant-a/",
        "/api/v1/tenants/tenant-a/quotas/",
        "/api/v1/tenants/tenant-a/members/",
    ):
        response = charlie.get(path)
        assert response.status_code == 404, path
        assert response.json()["status"] == 404
    assert charlie.post("/api/v1/tenants/tenant-a/suspend/").status_code == 404
    assert [t["slug"] for t in charlie.get("/api/v1/tenants/").json()["results"]] == ["tenant-b"]


def test_a_viewer_sees_but_a_change_is_forbidden(api, people):
    Tenant.objects.filter(pk=people["a"].pk).update(state="ready")
    bob = api(people["bob"])
    assert bob.get("/api/v1/tenants/tenant-a/").status_code == 200
    response = bob.post("/api/v1/tenants/tenant-a/suspend/")
    assert response.status_code == 403
    assert response.json()["type"] == "/problems/forbidden"


def test_field_errors_come_back_as_problem_details(api, admin, demo_fleet):
    client = api(admin)
    response = client.post("/api/v1/tenants/", {"slug": "Bad Slug"}, format="json")
    assert response.status_code == 400
    assert "slug" in response.json()["errors"]

    client.post("/api/v1/tenants/", {"slug": "vision"}, format="json")
    unknown = client.put("/api/v1/tenants/vision/quotas/h900/", {"guaranteed": 1}, format="json")
    assert unknown.status_code == 400
    assert "gpu-classes" in unknown.json()["errors"]["gpu_class"][0]
    not_int = client.put("/api/v1/tenants/vision/quotas/h200-141gb/", {"guaranteed": "lots"}, format="json")
    assert not_int.status_code == 400
    assert "guaranteed" in not_int.json()["errors"]
    negative = client.put("/api/v1/tenants/vision/quotas/h200-141gb/", {"guaranteed": -3}, format="json")
    assert negative.status_code == 400
    assert "0 to 2147483647" in negative.json()["errors"]["guaranteed"][0]


def test_a_forbidden_transition_is_a_409_problem(api, admin, demo_fleet):
    client = api(admin)
    client.post("/api/v1/tenants/", {"slug": "vision"}, format="json")
    response = client.post("/api/v1/tenants/vision/resume/")
    assert response.status_code == 409
    assert response.json()["current_state"] == "pending"


def test_lists_are_paginated(api, admin, make_tenant):
    for n in range(3):
        make_tenant(f"team-{n}")
    page = api(admin).get("/api/v1/tenants/?limit=2").json()
    assert page["count"] == 3
    assert len(page["results"]) == 2
    assert page["next"]


def test_a_repeated_post_with_the_same_idempotency_key_creates_once(api, admin, demo_fleet):
    client = api(admin)
    body = {"slug": "vision"}
    first = client.post("/api/v1/tenants/", body, format="json", HTTP_IDEMPOTENCY_KEY="k-1")
    again = client.post("/api/v1/tenants/", body, format="json", HTTP_IDEMPOTENCY_KEY="k-1")

    assert first.status_code == again.status_code == 201
    assert again["Idempotent-Replayed"] == "true"
    assert again.json()["id"] == first.json()["id"]
    assert Tenant.objects.count() == 1

    other = client.post("/api/v1/tenants/", {"slug": "speech"}, format="json", HTTP_IDEMPOTENCY_KEY="k-1")
    assert other.status_code == 422
    assert "different request" in other.json()["detail"]


def test_anonymous_callers_get_401(api, demo_fleet):
    response = api(None).get("/api/v1/tenants/")
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")
