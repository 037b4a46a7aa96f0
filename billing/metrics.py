"""Prometheus metrics of metering, served on gpucloud's /metrics."""

from prometheus_client import Counter, Gauge

METER_SCRAPES = Counter(
    "gpucloud_metering_scrapes_total",
    "Node scrapes ingested, by outcome",
    ["host_cluster", "source", "status"],
)
METER_ANOMALIES = Counter(
    "gpucloud_metering_anomalies_total",
    "Samples that were garbled, late, duplicate, or gaps not billed",
    ["host_cluster", "kind"],
)
METER_LAST_SUCCESS = Gauge(
    "gpucloud_metering_last_success_timestamp_seconds",
    "When a collection round of the host cluster last succeeded",
    ["host_cluster"],
)
METER_ROUNDS_HELD = Gauge(
    "gpucloud_metering_rounds_held",
    "Collection rounds of the host cluster waiting for its live view to catch up",
    ["host_cluster"],
)
METER_ROUNDS_BEFORE_VIEW = Counter(
    "gpucloud_metering_rounds_before_view_total",
    "Rounds ingested after METER_VIEW_WAIT without the live view's events: pod edges from the scrapes",
    ["host_cluster"],
)
