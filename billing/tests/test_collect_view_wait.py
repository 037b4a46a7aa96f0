"""A Kubernetes host cluster's round waits for its live view (docs/billing.md, "Waiting for the live view").

The pods' exact edges come from the `fleet.Pod` rows the live view writes from the pod watch; the watch can
bring a pod's end after the scrape that covers it. Here the view's watermark (`PodWatch.synced_at`) and rows
are set by hand, the exporters are served on loopback, and `mini` is made a Kubernetes host cluster.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from io import StringIO
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from django.core.management import call_command
from django.db.models import Sum

from billing import collect as collector
from billing.collect import collect_host_cluster
from billing.metrics import METER_ROUNDS_BEFORE_VIEW, METER_ROUNDS_HELD
from billing.models import MICRO, CollectionSource, HeldRound, ScrapeRecord, UsageEntry
from billing.services.ingest import ingest_round
from billing.simexporter import stop_all
from billing.tasks import ingest_held
from billing.tests.conftest import A100, H100, Endpoints, Row, at, exposition, gpu_uuid
from billing.tests.test_hami_metering import FIXTURE as HAMI_FIXTURE
from billing.tests.test_hami_metering import dcgm_bodies as hami_dcgm_bodies
from fleet.models import HostCluster, Pod, PodWatch
from gpucloud import celery as names

EDGE = "tenant-acme/edge"  # on h100-0 GPU 0 from 22 s to 51 s: DCGM sees it at the 30 s scrape only
# `blink` holds h100-0 GPU 1 from 35 s to 45 s: between two scrapes, DCGM never sees it.


def bodies(t: int) -> dict[str, str]:
    h100 = [
        Row(gpu_uuid("h100-0", 0), pod=EDGE if t == 30 else "", index=0),
        Row(gpu_uuid("h100-0", 1), index=1),
    ]
    a100 = [Row(gpu_uuid("a100-0", 0), model=A100)]
    return {"/dcgm/h100-0": exposition("h100-0", h100), "/dcgm/a100-0": exposition("a100-0", a100)}


@pytest.fixture(autouse=True)
def asked(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    """The follow-up tasks the collector asks for, instead of sending them to the broker."""
    sent: list[tuple[Any, ...]] = []
    monkeypatch.setattr(
        collector, "enqueue", lambda name, *args, countdown=None: sent.append((name, *args, countdown))
    )
    return sent


@pytest.fixture
def kube(mini: HostCluster) -> Iterator[tuple[HostCluster, Endpoints]]:
    """`mini` as a Kubernetes host cluster read from exporters on loopback, with a live view that has synced
    nothing yet."""
    HostCluster.objects.filter(pk=mini.pk).update(driver=HostCluster.Driver.KUBERNETES)
    mini.refresh_from_db()
    PodWatch.objects.create(host_cluster=mini, synced_at=None)
    served = Endpoints()
    CollectionSource.objects.create(
        host_cluster=mini, kind=CollectionSource.Kind.EXPORTER, url=served.base + "/dcgm/{node}"
    )
    yield mini, served
    served.stop()


def collect(host: HostCluster, served: Endpoints, t: int) -> dict[str, ScrapeRecord]:
    served.bodies.clear()
    served.bodies.update(bodies(t))
    return collect_host_cluster(host, at(t))


def view_synced(host: HostCluster, t: float) -> None:
    PodWatch.objects.filter(host_cluster=host).update(synced_at=at(t))


def billed(**filters: Any) -> dict[str, float]:
    rows = UsageEntry.objects.filter(**filters).values_list("pod").annotate(s=Sum("gpu_us"))
    return {pod: s / MICRO for pod, s in rows}


def rounds_ingested(host: HostCluster) -> list[datetime]:
    return sorted(set(ScrapeRecord.objects.filter(host_cluster=host).values_list("at", flat=True)))


def test_a_round_waits_for_the_view_and_is_billed_once_with_the_exact_edges(kube, tenant_on, make_pod):
    host, served = kube
    tenant_on("acme")
    view_synced(host, 6)
    collect(host, served, 0)  # the view holds events up to 6 s: round 0 is billed at once
    assert rounds_ingested(host) == [at(0)]

    edge = make_pod("edge", "tenant-acme", "h100-80gb", "h100-0", [0], at(22))  # its start is seen
    view_synced(host, 25)
    assert collect(host, served, 30) == {}  # 25 s < 30 s + slack: the round waits
    assert HeldRound.objects.filter(host_cluster=host).count() == 1

    view_synced(host, 50)  # edge's end (51 s) and blink have not reached the view yet
    records = collect(host, served, 60)
    assert set(records) == {"h100-0", "a100-0"}
    assert records["h100-0"].at == at(30)
    assert rounds_ingested(host) == [at(0), at(30)]  # round 60 waits for the view

    # The late events arrive: edge's end, and a pod that lived wholly between the scrapes at 30 s and 60 s.
    Pod.objects.filter(pk=edge.pk).update(finished_at=at(51))
    make_pod("blink", "tenant-acme", "h100-80gb", "h100-0", [1], at(35), at(45))
    view_synced(host, 70)
    collect(host, served, 90)
    assert rounds_ingested(host) == [at(0), at(30), at(60)]
    assert billed(namespace="tenant-acme") == {"edge": 29.0, "blink": 10.0}  # 22-51 s and 35-45 s, exactly
    assert METER_ROUNDS_HELD.labels(host.name)._value.get() == 1  # round 90

    # Collected again, replayed, or a worker that restarts: nothing is billed twice.
    collect(host, served, 90)
    assert HeldRound.objects.filter(host_cluster=host).count() == 1
    ingest_round(host, at(60), {"h100-0": exposition("h100-0", [Row(gpu_uuid("h100-0", 0))])})
    view_synced(host, 200)
    collect(host, served, 120)
    assert rounds_ingested(host) == [at(t) for t in (0, 30, 60, 90, 120)]
    assert billed(namespace="tenant-acme") == {"edge": 29.0, "blink": 10.0}
    assert sum(billed().values()) == 3 * 120  # three GPUs for 120 s: never more than their time
    assert not HeldRound.objects.filter(host_cluster=host).exists()


def test_a_round_past_the_longest_wait_is_billed_with_scrape_edges_and_reported(
    kube, tenant_on, settings, caplog
):
    host, served = kube
    tenant_on("acme")
    settings.METER_VIEW_WAIT = 60
    before = METER_ROUNDS_BEFORE_VIEW.labels(host.name)._value.get()
    view_synced(host, -10)  # the watch is lost: the view never gets edge nor blink
    assert collect(host, served, 0) == {}
    assert collect(host, served, 30) == {}
    with caplog.at_level(logging.WARNING, logger="billing.collect"):
        records = collect(host, served, 60)  # round 0 has waited 60 s: billed all the same
    assert records["h100-0"].at == at(0)
    assert rounds_ingested(host) == [at(0)]
    collect(host, served, 90)
    collect(host, served, 120)
    assert rounds_ingested(host) == [at(0), at(30), at(60)]
    # Nothing from the view: edge gets the half-interval edges (15-45 s), blink is not billed.
    assert billed(namespace="tenant-acme") == {"edge": 30.0}
    assert METER_ROUNDS_BEFORE_VIEW.labels(host.name)._value.get() == before + 3
    assert "ingested before the live view caught up" in caplog.text
    source = CollectionSource.objects.get(host_cluster=host)
    assert source.last_status == "partial"
    assert f"round at {at(60).isoformat()} billed after waiting 60 s for the live view" in source.last_message


def test_a_view_that_never_synced_holds_rounds_only_the_longest_wait(kube, settings):
    host, served = kube
    settings.METER_VIEW_WAIT = 30
    PodWatch.objects.filter(host_cluster=host).delete()
    assert collect(host, served, 0) == {}
    assert collect(host, served, 30)["h100-0"].at == at(0)
    assert "the live view never synced" in CollectionSource.objects.get(host_cluster=host).last_message


def test_a_simulated_host_cluster_is_never_held(mini):
    """The simulator writes its pods before its exporters show them: nothing to wait for, whatever a
    PodWatch row says."""
    PodWatch.objects.create(host_cluster=mini, synced_at=at(-600))
    try:
        records = collect_host_cluster(mini, at(0))
    finally:
        stop_all()
    assert set(records) == {"h100-0", "a100-0"}
    assert not HeldRound.objects.exists()


class FakePrometheus:
    """A loopback `/api/v1/query` answering, for any instant asked, one utilisation series per GPU of `mini`;
    it keeps the instants it was asked about."""

    def __init__(self) -> None:
        self.asked: list[float] = []
        asked = self.asked

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                t = float(parse_qs(urlsplit(self.path).query)["time"][0])
                asked.append(t)
                series = [
                    {
                        "metric": {
                            "__name__": "DCGM_FI_DEV_GPU_UTIL",
                            "gpu": "0",
                            "UUID": gpu_uuid(node, 0),
                            "modelName": model,
                            "hostname": node,
                        },
                        "value": [t, "50"],
                    }
                    for node, model in (("h100-0", H100), ("a100-0", A100))
                ]
                body = json.dumps({"status": "success", "data": {"resultType": "vector", "result": series}})
                data = body.encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_a_prometheus_round_keeps_no_bodies_and_is_read_at_its_own_instant_when_ingested(mini):
    HostCluster.objects.filter(pk=mini.pk).update(driver=HostCluster.Driver.KUBERNETES)
    mini.refresh_from_db()
    PodWatch.objects.create(host_cluster=mini, synced_at=at(-10))
    prometheus = FakePrometheus()
    CollectionSource.objects.create(
        host_cluster=mini, kind=CollectionSource.Kind.PROMETHEUS, url=prometheus.base
    )
    try:
        assert collect_host_cluster(mini, at(0)) == {}
        assert prometheus.asked == []  # nothing read yet
        assert HeldRound.objects.get(host_cluster=mini).bodies is None
        view_synced(mini, 40)
        records = collect_host_cluster(mini, at(30))
    finally:
        prometheus.stop()
    assert prometheus.asked == [at(0).timestamp(), at(30).timestamp()]  # each round at its own instant
    assert records["h100-0"].at == at(30)
    assert records["h100-0"].source == ScrapeRecord.Source.PROMETHEUS
    assert rounds_ingested(mini) == [at(0), at(30)]


def test_a_held_round_is_billed_with_the_hami_allocations_read_with_it(kube, tenant_on):
    """HAMi's metrics say who shares a GPU now: a held round keeps what they said when it was taken."""
    host, served = kube
    acme = tenant_on("acme")
    tenant_on("beta")
    CollectionSource.objects.filter(host_cluster=host).update(hami_url=served.base + "/hami")
    for t in (0, 30, 60):
        served.bodies.clear()
        served.bodies.update({**hami_dcgm_bodies(t), "/hami": HAMI_FIXTURE})
        assert collect_host_cluster(host, at(t)) == {}
    served.bodies.clear()  # HAMi's metrics gone by the time the view catches up
    served.bodies.update(hami_dcgm_bodies(90))
    view_synced(host, 100)
    records = collect_host_cluster(host, at(90))
    assert "HAMi scheduler metrics" in records["h100-0"].reason  # round 90: read without HAMi, not billed
    usage = UsageEntry.objects.filter(tenant=acme).values_list("gpu_class").annotate(s=Sum("gpu_us"))
    assert dict(usage) == {"h100-80gb": 60 * MICRO, "h100-80gb.hami-25": 15 * MICRO}


def test_a_held_round_is_looked_at_again_once_the_view_may_hold_its_events(kube, asked):
    """Not a whole pass later: the pass asks for a look 6 s on (the slack and a second), and that look bills
    the round if the view has caught up by then."""
    host, served = kube
    before = METER_ROUNDS_BEFORE_VIEW.labels(host.name)._value.get()
    view_synced(host, 6)
    collect(host, served, 0)
    assert asked == []  # nothing held: nothing to look at again
    collect(host, served, 30)
    assert asked == [(names.INGEST_HELD, host.pk, 6.0)]
    view_synced(host, 36)  # the view's watch has brought every event up to 36 s
    ingest_held(host.pk)
    assert rounds_ingested(host) == [at(0), at(30)]
    assert METER_ROUNDS_BEFORE_VIEW.labels(host.name)._value.get() == before  # on time: nothing to report


def test_the_meter_command_says_how_many_rounds_wait_for_the_view(kube):
    _, served = kube
    served.bodies.update(bodies(0))
    out = StringIO()
    call_command("meter", "collect", stdout=out)
    assert out.getvalue() == "mini: 0 nodes, 0 not fully collected, 1 held for the live view\n"


def test_a_body_with_a_nul_character_is_held_and_billed(kube):
    """PostgreSQL's JSON holds no NUL: the held body keeps a replacement character there instead."""
    host, served = kube
    view_synced(host, 100)
    garbled = bodies(0)
    garbled["/dcgm/h100-0"] = garbled["/dcgm/h100-0"].replace(
        'DCGM_FI_DEV_GPU_UTIL{gpu="1"', 'DCGM_FI_DEV_GPU_UTIL{gpu="1\x00"'
    )
    served.bodies.update(garbled)
    records = collect_host_cluster(host, at(0))
    assert {r.status for r in records.values()} == {ScrapeRecord.Status.OK}
    assert rounds_ingested(host) == [at(0)]
