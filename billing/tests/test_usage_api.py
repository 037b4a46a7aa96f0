"""GET /api/v1/usage/: sums of the ledger, each tenant seeing only its own."""

from __future__ import annotations

import pytest

from billing.services.ingest import ingest_scrape
from billing.tests.conftest import Row, at, exposition, gpu_uuid


@pytest.fixture
def usage(mini, people, admin):
    """tenant-a: 60 s on GPU 0 in hour 12 and 30 s in hour 13; tenant-b: 90 s on GPU 1; idle GPU 2."""
    for slug in ("tenant-a", "tenant-b"):
        # `people` made them on the demo fleet; the usage here is on `mini`, so move their namespaces there.
        cluster = people["a" if slug == "tenant-a" else "b"].cluster
        cluster.host_cluster = mini
        cluster.save()
    for t in (3540, 3570, 3600, 3630):  # 12:59:00 … 13:00:30
        rows = [
            Row(gpu_uuid("h100-0", 0), pod="tenant-tenant-a/a"),
            Row(gpu_uuid("h100-0", 1), index=1, pod="tenant-tenant-b/b", util=100),
            Row(gpu_uuid("h100-0", 2), index=2),
        ]
        ingest_scrape(mini, "h100-0", at(t), exposition("h100-0", rows))
    return people


def results(response):
    assert response.status_code == 200, response.content
    return response.json()["results"]


def test_a_tenant_member_sees_only_its_own_usage_by_class(api, usage):
    rows = results(api(usage["alice"]).get("/api/v1/usage/"))
    assert rows == [
        {
            "tenant": "tenant-a",
            "gpu_class": "h100-80gb",
            "period_start": None,
            "gpu_seconds": "90.000000",
            "util_gpu_seconds": "45.000000",
            "joules": "0.000000",
        }
    ]


def test_usage_by_hour_splits_at_the_hour(api, usage):
    rows = results(api(usage["alice"]).get("/api/v1/usage/?group_by=hour"))
    assert [(r["period_start"], r["gpu_seconds"]) for r in rows] == [
        ("2026-05-10T12:00:00Z", "60.000000"),
        ("2026-05-10T13:00:00Z", "30.000000"),
    ]


def test_start_and_end_select_hours(api, usage):
    rows = results(api(usage["alice"]).get("/api/v1/usage/?group_by=day&start=2026-05-10T13:00:00Z"))
    assert [(r["period_start"], r["gpu_seconds"]) for r in rows] == [("2026-05-10T00:00:00Z", "30.000000")]


def test_an_administrator_sees_every_tenant_and_the_platform_idle_time(api, usage):
    rows = results(api(usage["admin"]).get("/api/v1/usage/"))
    assert [(r["tenant"], r["gpu_seconds"]) for r in rows] == [
        (None, "90.000000"),
        ("tenant-a", "90.000000"),
        ("tenant-b", "90.000000"),
    ]


def test_another_tenants_usage_is_not_found(api, usage):
    response = api(usage["charlie"]).get("/api/v1/usage/?tenant=tenant-a")
    assert response.status_code == 404
    assert response["Content-Type"] == "application/problem+json"


def test_a_bad_group_by_is_a_problem_naming_what_is_allowed(api, usage):
    response = api(usage["alice"]).get("/api/v1/usage/?group_by=week")
    assert response.status_code == 400
    assert "gpu_class, day, hour" in response.json()["detail"]


def test_usage_is_paginated(api, usage):
    body = api(usage["admin"]).get("/api/v1/usage/?limit=1").json()
    assert (body["count"], len(body["results"])) == (3, 1)
    assert body["next"]


def test_a_viewer_does_not_see_the_money(api, usage):
    # usage is priced: it is for owners, admins and billing viewers (docs/permissions.md); bob is told so
    assert api(usage["bob"]).get("/api/v1/usage/").status_code == 403
    assert api(usage["bob"]).get("/api/v1/usage/?tenant=tenant-a").status_code == 403


def test_anonymous_callers_get_401(api, usage):
    assert api(None).get("/api/v1/usage/").status_code == 401
