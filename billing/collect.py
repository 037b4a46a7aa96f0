"""Collection: fetch DCGM samples of every node of a host cluster and hand them to the ingest service.

Where a host cluster runs HAMi, its source's `hami_url` names HAMi's scheduler metrics; they are read each
round and say which pods share which GPU and by how much (`billing.hami`), as dcgm-exporter cannot.

Two sources: (a) each node's dcgm-exporter `/metrics` (the simulated fleet serves one per node on loopback),
(b) a Prometheus server's HTTP API (`/api/v1/query` for the DCGM families at one instant). A node that cannot
be read is recorded as a failed scrape with the reason; what was read is kept; the unique scrape record
makes a repeated round add nothing. The outcome is kept on the host cluster's `CollectionSource` and in
metrics.

A Kubernetes host cluster's round is not ingested as soon as it is read: its pods' exact edges come from the
live view (`billing.lifecycle`), whose events can reach it after the round. The round is kept as a
`HeldRound` until the view holds every pod event up to its time (`PodWatch.synced_at`), then ingested by a
later pass, oldest first; after `METER_VIEW_WAIT` it is ingested all the same, with the edges the view has,
and reported. Simulated host clusters write their pods before their exporters show them: never held.
"""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.parse
import urllib.request
from collections import defaultdict
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from billing import dcgm, hami, simexporter
from billing.lifecycle import pod_facts
from billing.metrics import METER_LAST_SUCCESS, METER_ROUNDS_BEFORE_VIEW, METER_ROUNDS_HELD
from billing.models import CollectionSource, HeldRound, ScrapeRecord
from billing.services.ingest import ClusterFacts, Failure, ingest_round
from fleet import health_rules
from fleet.models import HostCluster, Node, PodWatch
from fleet.selectors import PRESENT, serving_host_clusters  # a node gone from its cluster is not scraped
from gpucloud import celery as names
from gpucloud.celery import enqueue

log = logging.getLogger(__name__)
# The billing families and the health fields (docs/health.md), in one instant query.
FAMILY_QUERY = "{__name__=~" + '"' + "|".join([*dcgm.FAMILIES, *health_rules.FIELDS]) + '"}'
_HOSTNAME = ("hostname", "Hostname")
# A pod's end reaches the API server a moment after it happens (the kubelet sees a container stop at its next
# relist, every second, and reports the status at once), and node clocks differ by up to a second under NTP:
# the view is complete for a round at t once it holds every event up to t + VIEW_SLACK.
VIEW_SLACK = timedelta(seconds=5)
_AGAIN = timedelta(seconds=1)  # after VIEW_SLACK, the view's write of its watermark


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
    records = ingest_round(
        host_cluster, at, _scrape(targets), source=ScrapeRecord.Source.EXPORTER, facts=facts
    )
    _note(host_cluster, CollectionSource.Kind.EXPORTER, "", at, records)
    return records


def _scrape(targets: Mapping[str, str]) -> dict[str, str | Failure]:
    """Every node's exporter, 16 at a time."""
    timeout = settings.METER_SCRAPE_TIMEOUT
    with ThreadPoolExecutor(max_workers=min(16, max(1, len(targets)))) as pool:
        return dict(zip(targets, pool.map(lambda url: fetch(url, timeout), targets.values()), strict=True))


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
    return _hami_facts(url, fetch(url, settings.METER_SCRAPE_TIMEOUT))


def _hami_facts(url: str, body: str | Failure) -> ClusterFacts | Failure:
    if isinstance(body, Failure):
        return Failure(f"HAMi scheduler metrics: {body.reason}")
    allocations = hami.parse(body)
    if not allocations.family and allocations.bad_lines:
        return Failure(
            f"HAMi scheduler metrics at {url}: no readable allocation (line {allocations.bad_lines[0][0]})"
        )
    return ClusterFacts(hami_allocations=allocations)


def collect_host_cluster(host_cluster: HostCluster, at: datetime | None = None) -> dict[str, ScrapeRecord]:
    """One collection round of a host cluster from its configured source.

    Returns the scrape records of the round ingested last: this one, or on a Kubernetes host cluster the
    newest held round the live view has caught up with (none while they all wait).
    """
    at = (at or timezone.now()).replace(microsecond=0)
    source = CollectionSource.objects.filter(host_cluster=host_cluster).first()
    taken = _take(host_cluster, source, at)
    if host_cluster.driver != HostCluster.Driver.KUBERNETES:
        return _ingest(host_cluster, source, taken) if taken is not None else {}
    if taken is not None:  # the same round taken twice is held once
        HeldRound.objects.bulk_create([taken], ignore_conflicts=True)
    records = ingest_held(host_cluster, at)  # rounds held before a source was removed are still billed
    if HeldRound.objects.filter(host_cluster=host_cluster).exists():
        # Look again once the view may hold this round's events, rather than a whole pass later.
        enqueue(names.INGEST_HELD, host_cluster.pk, countdown=(VIEW_SLACK + _AGAIN).total_seconds())
    return records


def _take(host_cluster: HostCluster, source: CollectionSource | None, at: datetime) -> HeldRound | None:
    """Read the round at `at` from the cluster's source (unsaved); None when the cluster has no source."""
    hami = None
    if source is not None and source.hami_url:
        hami = _keep(fetch(source.hami_url, settings.METER_SCRAPE_TIMEOUT))
    if source is not None and source.kind == CollectionSource.Kind.PROMETHEUS:
        # Prometheus answers for any instant within its retention: read when ingested.
        return HeldRound(host_cluster=host_cluster, at=at, source=ScrapeRecord.Source.PROMETHEUS, hami=hami)
    if source is not None and source.url:
        nodes = Node.objects.filter(PRESENT, host_cluster=host_cluster).values_list("name", flat=True)
        targets = {n: source.url.format(node=n) for n in nodes}
    elif host_cluster.driver == HostCluster.Driver.SIMULATED:
        targets = simexporter.pool_for(host_cluster).targets
    else:
        return None
    bodies = {node: _keep(body) for node, body in _scrape(targets).items()}
    return HeldRound(
        host_cluster=host_cluster, at=at, source=ScrapeRecord.Source.EXPORTER, bodies=bodies, hami=hami
    )


def _keep(body: str | Failure) -> str | dict[str, str]:
    """A body or a failure as JSON-ready data a held round keeps (PostgreSQL's JSON holds no NUL character: a
    garbled body keeps a replacement character there)."""
    if isinstance(body, Failure):
        return {"failed": body.reason}
    return body.replace("\x00", "\ufffd")


def _kept(value: Any) -> str | Failure:
    return Failure(value["failed"]) if isinstance(value, dict) else value


def _ingest(
    host_cluster: HostCluster, source: CollectionSource | None, taken: HeldRound
) -> dict[str, ScrapeRecord]:
    """Ingest a round taken by `_take`, with the pods' facts as the cluster's rows say them now."""
    at = taken.at
    # The pods' exact edges, classes and shares, from the simulator's or the live view's rows.
    facts = pod_facts(host_cluster, at, settings.METER_MAX_GAP)
    if taken.hami is not None:
        read = _hami_facts(source.hami_url if source is not None else "", _kept(taken.hami))
        if isinstance(read, Failure):
            # Without HAMi's word its pods' GPUs would read as idle: the round is not taken. The next round
            # bills the interval from the last good samples (up to METER_MAX_GAP), as after any failed scrape.
            nodes = Node.objects.filter(PRESENT, host_cluster=host_cluster).values_list("name", flat=True)
            records = ingest_round(host_cluster, at, dict.fromkeys(nodes, read), source=taken.source)
            if source is not None:
                _note(host_cluster, source.kind, source.url, at, records)
            return records
        facts = replace(facts, hami_allocations=read.hami_allocations)
    if taken.bodies is None:  # taken from Prometheus: read now, at the round's instant
        if source is None or source.kind != CollectionSource.Kind.PROMETHEUS:
            gone = Failure(
                "the round was to be read from Prometheus, which is no longer the cluster's source"
            )
            nodes = Node.objects.filter(PRESENT, host_cluster=host_cluster).values_list("name", flat=True)
            return ingest_round(host_cluster, at, dict.fromkeys(nodes, gone), source=taken.source)
        return collect_prometheus(host_cluster, source.url, at, facts)
    bodies = {node: _kept(body) for node, body in taken.bodies.items()}
    records = ingest_round(host_cluster, at, bodies, source=ScrapeRecord.Source.EXPORTER, facts=facts)
    _note(host_cluster, CollectionSource.Kind.EXPORTER, "", at, records)
    return records


def ingest_held(host_cluster: HostCluster, now: datetime) -> dict[str, ScrapeRecord]:
    """Ingest, oldest first, the held rounds of a Kubernetes host cluster that the live view has caught up
    with, and those held `METER_VIEW_WAIT` or longer (reported); returns the records of the last one.

    One transaction locks the cluster's held rounds, so two collectors never ingest them out of order: the
    second waits, then finds them gone. Each round is ingested and deleted together; a round ingested again
    after a crash adds nothing (its scrape records are unique).
    """
    synced = PodWatch.objects.filter(host_cluster=host_cluster).values_list("synced_at", flat=True).first()
    wait = timedelta(seconds=settings.METER_VIEW_WAIT)
    source = CollectionSource.objects.filter(host_cluster=host_cluster).first()
    records: dict[str, ScrapeRecord] = {}
    with transaction.atomic():
        # Locked by their times; each round's bodies (65 kB a node) are read only when it is ingested.
        held = HeldRound.objects.select_for_update().filter(host_cluster=host_cluster).order_by("at")
        for pk, at in held.values_list("pk", "at"):
            complete = synced is not None and synced >= at + VIEW_SLACK
            if not complete and now - at < wait:
                break  # later rounds wait too: a device's samples are integrated in time order
            records = _ingest(host_cluster, source, HeldRound.objects.get(pk=pk))
            HeldRound.objects.filter(pk=pk).delete()
            if not complete:
                _report_before_view(host_cluster, at, synced)
        waiting = HeldRound.objects.filter(host_cluster=host_cluster).count()
    METER_ROUNDS_HELD.labels(host_cluster.name).set(waiting)
    return records


def _report_before_view(host_cluster: HostCluster, at: datetime, synced: datetime | None) -> None:
    """A round billed without the live view's events up to its time: said in the log, in metrics and on the
    cluster's collection status, as its pods' edges may be the scrapes' and a short pod may be missed."""
    view = (
        f"the live view holds events up to {synced.isoformat()}" if synced else "the live view never synced"
    )
    message = (
        f"round at {at.isoformat()} billed after waiting {settings.METER_VIEW_WAIT:g} s for the live view "
        f"({view}): pod edges not observed by then are the scrapes'"
    )
    log.warning(
        "metering round ingested before the live view caught up",
        extra={"host_cluster": host_cluster.name, "round": at.isoformat(), "synced_at": synced},
    )
    METER_ROUNDS_BEFORE_VIEW.labels(host_cluster.name).inc()
    source = CollectionSource.objects.filter(host_cluster=host_cluster).first()
    if source is not None and source.last_collected_at == at:
        status = (
            ScrapeRecord.Status.PARTIAL
            if source.last_status == ScrapeRecord.Status.OK
            else source.last_status
        )
        joined = f"{source.last_message}; {message}" if source.last_message else message
        source.last_status, source.last_message = status, joined[:2000]
        source.save(update_fields=["last_status", "last_message"])


def collect_all(at: datetime | None = None) -> dict[str, Any]:
    """The periodic pass: every host cluster, one round each."""
    return {hc.name: collect_host_cluster(hc, at) for hc in serving_host_clusters()}  # retired: none
