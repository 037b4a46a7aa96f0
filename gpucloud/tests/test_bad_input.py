"""Hostile input meets the shared guards (gpucloud/api/{middleware,parsers,problems}.py): a clear 4xx, never a
500, on PostgreSQL — which refuses NUL in text, so a NUL that reached a query used to fail there."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tenants.models import Tenant
from tenants.tokens import create_token
from tests.fixtures import SYSTEM

PROBLEM_JSON = "application/problem+json"


def assert_problem(response, status: int, type_: str) -> dict[str, Any]:
    assert response.status_code == status, response.content[:300]
    assert response["Content-Type"] == PROBLEM_JSON
    body: dict[str, Any] = response.json()
    assert body["type"] == f"/problems/{type_}"
    assert body["status"] == status
    return body


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/host-clusters/%00/",
        "/api/v1/rate-cards/%00/",
        "/api/v1/invoices/%00/",
        "/api/v1/invoices/%00/csv/",
        "/api/v1/budgets/%00/",
        "/api/v1/usage/?tenant=%00",
        "/api/v1/audit-events/?tenant=a%00b",
    ],
)
def test_a_nul_byte_in_a_path_or_a_filter_is_a_400_problem(api, admin, demo_fleet, path):
    body = assert_problem(api(admin).get(path), 400, "invalid-request")
    assert "NUL" in body["detail"]


def test_a_nul_byte_in_a_portal_path_or_a_header_is_a_400(client, api, admin, demo_fleet):
    client.force_login(admin)
    page = client.get("/tenants/%00/")
    assert page.status_code == 400
    assert b"NUL" in page.content

    keyed = api(admin).post(
        "/api/v1/tenants/", {"slug": "vision"}, format="json", HTTP_IDEMPOTENCY_KEY="k\x00"
    )
    assert "NUL" in assert_problem(keyed, 400, "invalid-request")["detail"]
    assert not Tenant.objects.filter(slug="vision").exists()


def test_a_json_body_nested_100000_deep_is_a_400_naming_the_limit(api, admin, demo_fleet):
    response = api(admin).post("/api/v1/tenants/", "[" * 100_000, content_type="application/json")
    assert "nested more than 32 levels" in assert_problem(response, 400, "invalid-request")["detail"]

    just_over = json.dumps({"slug": "vision", "x": json.loads("[" * 32 + "]" * 32)})
    response = api(admin).post("/api/v1/tenants/", just_over, content_type="application/json")
    assert "x" + "[0]" * 31 in assert_problem(response, 400, "invalid-request")["errors"]


def test_a_nul_anywhere_in_a_json_body_is_refused_naming_where(api, admin, demo_fleet):
    body = {"effective_from": "2026-01-01T00:00:00Z", "prices": {"h200-141gb": "2.5", "a\x00": "1"}}
    response = api(admin).post("/api/v1/rate-cards/", body, format="json")
    problem = assert_problem(response, 400, "invalid-request")
    assert "NUL" in problem["detail"]
    assert any(key.startswith("prices.") for key in problem["errors"])


def test_an_oversized_body_is_a_413_problem_naming_the_limit(api, admin, demo_fleet, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    response = api(admin).post(
        "/api/v1/tenants/", {"slug": "vision", "display_name": "x" * 2000}, format="json"
    )
    assert "1000 bytes" in assert_problem(response, 413, "payload-too-large")["detail"]


def test_a_throttled_answer_says_when_to_retry(api, admin, settings):
    settings.GPUCLOUD_THROTTLE_RATES = {"tokens": "1/min"}
    client = api(admin)
    assert client.get("/api/v1/tokens/").status_code == 200
    throttled = client.get("/api/v1/tokens/")
    assert_problem(throttled, 429, "throttled")
    assert 1 <= int(throttled["Retry-After"]) <= 60


def test_the_sign_in_page_says_when_to_retry_too(client, make_user, settings):
    settings.LOGIN_ATTEMPTS = 1
    make_user("alice")
    client.post("/login/", {"username": "alice", "password": "wrong"})
    refused = client.post("/login/", {"username": "alice", "password": "pw-alice"})
    assert refused.status_code == 429
    assert refused["Retry-After"] == str(settings.LOGIN_ATTEMPTS_WINDOW)


def test_a_token_without_the_scope_gets_forbidden_naming_the_scope_it_needs(client, admin, demo_fleet):
    _, token = create_token(actor=SYSTEM, user=admin, name="reader", scope="read")
    response = client.post(
        "/api/v1/tenants/",
        {"slug": "vision"},
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )
    detail = assert_problem(response, 403, "forbidden")["detail"]
    assert "scope 'write'" in detail
    assert "ApiToken" not in detail
