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
