"""deploy/grafana/gpucloud.json: a valid dashboard whose every query names metrics gpucloud really exports."""

from __future__ import annotations

import json
import re

from django.conf import settings

from gpucloud.celery import app
from gpucloud.observability import QueueDepth

DASHBOARD = settings.BASE_DIR / "deploy" / "grafana" / "gpucloud.json"
SUFFIXES = ("_bucket", "_count", "_sum", "_created")


def exported(client) -> set[str]:
    """Names on the web's /metrics (every app's metrics) and the queue gauge a worker adds to its own."""
    names = set(re.findall(r"^# TYPE (\S+) ", client.get("/metrics").content.decode(), re.M))
    names |= {family.name for family in QueueDepth(app, []).describe()}
    return names | {f"{name}_total" for name in names}


def family(name: str) -> str:
    """gpucloud_x_seconds_bucket -> gpucloud_x_seconds: the metric a histogram's series belong to."""
    return next((name.removesuffix(s) for s in SUFFIXES if name.endswith(s)), name)


def test_the_dashboard_is_valid_json_with_a_query_per_panel():
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"]
    assert dashboard["title"]
    assert dashboard["panels"]
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    assert all(panel["targets"] and all(t["expr"] for t in panel["targets"]) for panel in dashboard["panels"])


def test_every_metric_the_dashboard_queries_is_exported(client):
    wanted = set()
    for panel in json.loads(DASHBOARD.read_text())["panels"]:
        for target in panel["targets"]:
            wanted |= set(re.findall(r"\b(gpucloud_[a-z_]+)", target["expr"]))
    have = exported(client)
    missing = {name for name in wanted if family(name) not in have}
    assert not missing, f"the dashboard queries metrics nothing exports: {sorted(missing)}"


def test_the_dashboard_covers_latency_errors_reconcile_lag_collection_and_queue_depth():
    text = DASHBOARD.read_text()
    for metric in (
        "gpucloud_http_request_duration_seconds_bucket",
        'status=~\\"5..\\"',
        "gpucloud_reconcile_last_success_timestamp_seconds",
        "gpucloud_metering_scrapes_total",
        "gpucloud_queue_depth",
    ):
        assert metric in text, metric


def test_the_queue_depth_gauge_counts_the_messages_waiting_on_the_broker():
    with app.connection_for_write() as conn:
        conn.default_channel.queue_purge("default")
        for _ in range(3):
            app.send_task("billing.check_budgets", connection=conn)
        samples = {
            s.labels["queue"]: s.value for s in next(iter(QueueDepth(app, ["default"]).collect())).samples
        }
        conn.default_channel.queue_purge("default")
    assert samples == {"default": 3}
