"""The usage chart's data: every period of the days asked on the x axis, in epoch seconds (uPlot's unit),
and the range to draw, so one day of usage is drawn on its day and not spread over years."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from billing.services.ingest import ingest_scrape
from billing.tests.conftest import Row, exposition, gpu_uuid
from billing.tests.conftest import mini as mini  # the fixture: a small simulated host cluster

NOV_26 = datetime(2026, 11, 26, tzinfo=UTC)
DEC_2 = datetime(2026, 12, 2, tzinfo=UTC)
WEEK = "/tenants/tenant-a/usage/?start=2026-11-26&end=2026-12-02"


@pytest.fixture
def one_day_of_usage(people, mini):
    """Tenant A ran a pod on 2 December 2026 only, 10:00–10:01:30 UTC."""
    cluster = people["a"].cluster
    cluster.host_cluster = mini
    cluster.save()
    for t in (0, 30, 60, 90):
        when = DEC_2 + timedelta(hours=10, seconds=t)
        rows = [Row(gpu_uuid("h100-0", 0), pod="tenant-tenant-a/train", util=50)]
        ingest_scrape(mini, "h100-0", when, exposition("h100-0", rows))
    return people


def chart_of(page: str) -> dict[str, Any]:
    found = re.search(r'<script id="usage-data" type="application/json">(.*?)</script>', page, re.S)
    assert found, "the page has no chart data"
    chart: dict[str, Any] = json.loads(found.group(1))
    return chart


def test_a_week_with_one_day_of_usage_has_every_day_on_the_axis(client, one_day_of_usage):
    client.force_login(one_day_of_usage["alice"])
    data = chart_of(client.get(WEEK).content.decode())
    days = [int((NOV_26 + timedelta(days=i)).timestamp()) for i in range(7)]
    assert data["x"] == days
    assert data["range"] == [days[0], days[-1]]
    allocated = data["series"][0]
    assert allocated["label"] == "h100-80gb allocated"
    assert allocated["values"][:6] == [0, 0, 0, 0, 0, 0]
    assert allocated["values"][6] > 0


def test_one_day_by_day_is_drawn_over_that_day(client, one_day_of_usage):
    client.force_login(one_day_of_usage["alice"])
    data = chart_of(client.get("/tenants/tenant-a/usage/?start=2026-12-02&end=2026-12-02").content.decode())
    assert data["x"] == [int(DEC_2.timestamp())]
    assert data["range"] == [int(DEC_2.timestamp()), int((DEC_2 + timedelta(days=1)).timestamp())]


def test_by_hour_every_hour_of_the_days_asked_is_on_the_axis(client, one_day_of_usage):
    client.force_login(one_day_of_usage["alice"])
    url = "/tenants/tenant-a/usage/?start=2026-12-01&end=2026-12-02&group_by=hour"
    data = chart_of(client.get(url).content.decode())
    assert len(data["x"]) == 48
    assert data["x"][0] == int((DEC_2 - timedelta(days=1)).timestamp())
    assert data["x"][1] - data["x"][0] == 3600
    ten = data["x"].index(int((DEC_2 + timedelta(hours=10)).timestamp()))
    assert [i for i, v in enumerate(data["series"][0]["values"]) if v] == [ten]


def test_too_many_hours_are_refused_with_what_is_shown_instead(client, one_day_of_usage):
    client.force_login(one_day_of_usage["alice"])
    url = "/tenants/tenant-a/usage/?start=2026-01-01&end=2026-12-02&group_by=hour"
    page = client.get(url).content.decode()
    assert "by hour, at most 31 days are shown; showing the last ones" in page
    assert len(chart_of(page)["x"]) == 31 * 24
