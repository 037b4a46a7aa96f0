"""Collection: fetch DCGM samples of every node of a host cluster and hand them to the ingest service.

Where a host cluster runs HAMi, its source's `hami_url` names HAMi's scheduler metrics; they are read each
round and say which pods share which GPU and by how much (`billing.hami`), as dcgm-exporter cannot.

Two sources: (a) each node's dcgm-exporter `/metrics` (the simulated fleet serves one per node on loopback),
(b) a Prometheus server's HTTP API (`/api/v1/query` for the DCGM families at one instant). A node that cannot
be read is recorded as a failed scrape with the reason; what was read is kept; the unique scrape record
makes a repeated round add nothing. The outcome is kept on the host cluster's `CollectionSource` and in
metrics.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections import defaultdict
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import datetime
from typing import Any

from django.conf import settings
from django.utils import timezone

from billing import dcgm, hami, simexporter
from billing.lifecycle import pod_facts
from billing.metrics import METER_LAST_SUCCESS
from billing.models import CollectionSource, ScrapeRecord
from billing.services.ingest import ClusterFacts, Failure, ingest_round
from fleet import health_rules
from fleet.models import HostCluster, Node
from fleet.selectors import PRESENT, serving_host_clusters  # a node gone from its cluster is not scraped

# The billing families and the health fields (docs/health.md), in one instant query.
FAMILY_QUERY = "{__name__=~" + '"' + "|".join([*dcgm.FAMILIES, *health_rules.FIELDS]) + '"}'
_HOSTNAME = ("hostname", "Hostname")


def fetch(url: str, timeout: float) -> str | Failure:
    """One HTTP GET; any failure becomes the reason a person reads on the scrape record."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:  # only http(s) URLs are configured
            body: bytes = response.read()
            return body.decode("utf-8", errors="replace")
    except urllib.error.HTTPError as exc:
        return Failure(f"{url} answered HTTP {exc.code}")
    except TimeoutError:
        return Failure(f"{url} did not answer within {timeout:g} s")
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        if isinstance(reason, TimeoutError):
            return Failure(f"{url} did not answer within {timeout:g} s")
        return Failure(f"{url} could not be reached: {reason}")


def collect_exporters(
    host_cluster: HostCluster, at: datetime, targets: Mapping[str, str], facts: ClusterFacts | None = None
) -> dict[str, ScrapeRecord]:
    """Scrape every node's exporter (in parallel) and ingest the round as seen at `at`."""
    timeout = settings.METER_SCRAPE_TIMEOUT
    with ThreadPoolExecutor(max_workers=min(16, max(1, len(targets)))) as pool:
        bodies = dict(zip(targets, pool.map(lambda url: fetch(url, timeout), targets.values()), strict=True))
    records = ingest_round(host_cluster, at, bodies, source=ScrapeRecord.Source.EXPORTER, facts=facts)
    _note(host_cluster, CollectionSource.Kind.EXPORTER, "", at, records)
    return records


def collect_prometheus(
    host_cluster: HostCluster, base_url: str, at: datetime, facts: ClusterFacts | None = None
) -> dict[str, ScrapeRecord]:
    """Query Prometheus for the DCGM families at `at` and ingest them node by node.

    Fleet nodes without series at that instant are recorded as failed scrapes; nodes Prometheus knows and
    the fleet does not are ingested (and reported as unknown).
    """
    query = urllib.parse.urlencode({"query": FAMILY_QUERY, "time": f"{at.timestamp():.3f}"})
    answer = fetch(f"{base_url.rstrip('/')}/api/v1/query?{query}", settings.METER_SCRAPE_TIMEOUT)
    nodes = list(Node.objects.filter(PRESENT, host_cluster=host_cluster).values_list("name", flat=True))
    payloads: dict[str, str | Failure]
    if isinstance(answer, Failure):
        payloads = dict.fromkeys(nodes, answer)
    else:
        texts = _expositions(answer)
        if isinstance(texts, Failure):
            payloads = dict.fromkeys(nodes, texts)
        else:
            missing = Failure(f"Prometheus has no DCGM series for this node at {at.isoformat()}")
            payloads = {**dict.fromkeys(nodes, missing), **texts}
    records = ingest_round(host_cluster, at, payloads, source=ScrapeRecord.Source.PROMETHEUS, facts=facts)
    _note(host_cluster, CollectionSource.Kind.PROMETHEUS, base_url, at, records)
    return records


def _expositions(answer: str) -> dict[str, str] | Failure:
    """Prometheus' instant-vector JSON, back into one exposition text per node."""
    try:
        body = json.loads(answer)
        if body.get("status") != "success":
            return Failure(f"Prometheus refused the query: {body.get('error', 'no reason given')}")
        series = body["data"]["result"]
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        return Failure(f"Prometheus answered something that is not a query result: {exc}")
    lines: dict[str, list[str]] = defaultdict(list)
    for item in series:
        labels: dict[str, str] = item.get("metric", {})
        name = labels.pop("__name__", "")
        node = next((labels[k] for k in _HOSTNAME if labels.get(k)), "") or labels.get("instance", "")
        rendered = ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items())
        lines[node].append(f"{name}{{{rendered}}} {item['value'][1]}")
    return {node: "\n".join(node_lines) + "\n" for node, node_lines in lines.items()}


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _note(
    host_cluster: HostCluster, kind: str, url: str, at: datetime, records: Mapping[str, ScrapeRecord]
) -> None:
    """Keep the round's outcome where the host cluster's status shows it."""
    statuses = [r.status for r in records.values()]
    failed = [f"{n}: {r.reason}" for n, r in sorted(records.items()) if r.status != ScrapeRecord.Status.OK]
    status = (
        ScrapeRecord.Status.FAILED
        if statuses and all(s == ScrapeRecord.Status.FAILED for s in statuses)
        else ScrapeRecord.Status.PARTIAL
        if failed
        else ScrapeRecord.Status.OK
    )
    message = (
        f"{len(failed)} of {len(records)} nodes not fully collected: " + "; ".join(failed[:5])
        if failed
        else ""
    )
    source, _ = CollectionSource.objects.get_or_create(
        host_cluster=host_cluster, defaults={"kind": kind, "url": url}
    )
    source.last_collected_at, source.last_status, source.last_message = at, status, message[:2000]
    source.save(update_fields=["last_collected_at", "last_status", "last_message"])
    if status != ScrapeRecord.Status.FAILED:
        METER_LAST_SUCCESS.labels(host_cluster.name).set(at.timestamp())


def hami_facts(url: str) -> ClusterFacts | Failure:
    """HAMi's allocations from its scheduler's metrics, as facts for the round; why not, if unreadable."""
    body = fetch(url, settings.METER_SCRAPE_TIMEOUT)
    if isinstance(body, Failure):
        return Failure(f"HAMi scheduler metrics: {body.reason}")
    allocations = hami.parse(body)
    if not allocations.family and allocations.bad_lines:
        return Failure(
            f"HAMi scheduler metrics at {url}: no readable allocation (line {allocations.bad_lines[0][0]})"
        )
    return ClusterFacts(hami_allocations=allocations)


def collect_host_cluster(host_cluster: HostCluster, at: datetime | None = None) -> dict[str, ScrapeRecord]:
    """One collection round of a host cluster from its configured source."""
    at = (at or timezone.now()).replace(microsecond=0)
    source = CollectionSource.objects.filter(host_cluster=host_cluster).first()
    # The pods' exact edges, classes and shares, from the simulator's or the live view's rows.
    facts = pod_facts(host_cluster, at, settings.METER_MAX_GAP)
    if source is not None and source.hami_url:
        read = hami_facts(source.hami_url)
        if isinstance(read, Failure):
            # Without HAMi's word its pods' GPUs would read as idle: the round is not taken. The next round
            # bills the interval from the last good samples (up to METER_MAX_GAP), as after any failed scrape.
            nodes = Node.objects.filter(PRESENT, host_cluster=host_cluster).values_list("name", flat=True)
            records = ingest_round(host_cluster, at, dict.fromkeys(nodes, read), source=_source_of(source))
            _note(host_cluster, source.kind, source.url, at, records)
            return records
        facts = replace(facts, hami_allocations=read.hami_allocations)
    if source is not None and source.kind == CollectionSource.Kind.PROMETHEUS:
        return collect_prometheus(host_cluster, source.url, at, facts)
    if source is not None and source.url:
        nodes = Node.objects.filter(PRESENT, host_cluster=host_cluster).values_list("name", flat=True)
        return collect_exporters(host_cluster, at, {n: source.url.format(node=n) for n in nodes}, facts)
    if host_cluster.driver == HostCluster.Driver.SIMULATED:
        return collect_exporters(host_cluster, at, simexporter.pool_for(host_cluster).targets, facts)
    return {}


def _source_of(source: CollectionSource) -> str:
    kind = source.kind
    return (
        ScrapeRecord.Source.PROMETHEUS
        if kind == CollectionSource.Kind.PROMETHEUS
        else ScrapeRecord.Source.EXPORTER
    )


def collect_all(at: datetime | None = None) -> dict[str, Any]:
    """The periodic pass: every host cluster, one round each."""
    return {hc.name: collect_host_cluster(hc, at) for hc in serving_host_clusters()}  # retired: none
