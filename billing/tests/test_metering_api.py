"""GET /api/v1/metering/scrapes/ and /metering/sources/: what collection saw, for platform administrators."""

from __future__ import annotations

from billing.models import CollectionSource
from billing.services.ingest import ingest_scrape
from billing.tests.conftest import Row, at, exposition, gpu_uuid


def test_an_administrator_sees_each_scrape_with_its_counts_and_reason(api, admin, mini):
    ingest_scrape(mini, "h100-0", at(0), exposition("h100-0", [Row(gpu_uuid("h100-0", 0))]))
    ingest_scrape(mini, "h100-0", at(30), "garbage\n")
    rows = api(admin).get("/api/v1/metering/scrapes/?status=failed").json()["results"]
    assert [(r["node"], r["status"], r["devices"]) for r in rows] == [("h100-0", "failed", 0)]
    assert "no DCGM device samples" in rows[0]["reason"]


def test_the_collection_status_of_each_host_cluster_is_shown(api, admin, mini):
    CollectionSource.objects.create(
        host_cluster=mini,
        kind="prometheus",
        url="http://prom:9090",
        last_status="partial",
        last_message="1 of 2 nodes not fully collected: h100-0: timeout",
    )
    (row,) = api(admin).get("/api/v1/metering/sources/").json()["results"]
    assert (row["host_cluster"], row["kind"], row["last_status"]) == ("mini", "prometheus", "partial")


def test_tenants_do_not_see_metering_internals(api, people):
    for path in ("/api/v1/metering/scrapes/", "/api/v1/metering/sources/"):
        assert api(people["alice"]).get(path).status_code == 403
