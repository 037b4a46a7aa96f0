"""One watch per host cluster: the lease on the live view (the extender's feed writes it, the Celery pass
only when it is free), and the watermark (`PodWatch.synced_at`) saved with the watch position."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.db import DatabaseError, connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from clusters.tests.conftest import host  # noqa: F401  (the registered host cluster fixture)
from fleet.models import HostCluster, Pod, PodWatch
from placement import tasks
from placement.extender.service import Registry, ViewSink
from placement.live.claims import ClaimStore
from placement.live.lease import Lease, holder_of
from placement.live.view import SAVE_SECONDS, LiveView
from placement.live.watch import live_pass
from placement.tests.test_live_view import T0, api_of, gpu_pod, vision  # noqa: F401
from tenants.models import Tenant
from tests.kube_emulator import RunningEmulator


def wait_for(check: Callable[[], bool], seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def lapse(host_cluster: HostCluster) -> None:
    """The holder died: its lease ran out (no renewal came)."""
    past = timezone.now() - timedelta(seconds=1)
    PodWatch.objects.filter(host_cluster=host_cluster).update(held_until=past)


def rows(host_cluster: HostCluster) -> set[str]:
    return set(Pod.objects.filter(host_cluster=host_cluster).values_list("name", flat=True))


# --- the lease ------------------------------------------------------------------------------------


def test_one_holder_at_a_time_until_its_lease_lapses_or_it_lets_go(host: HostCluster) -> None:  # noqa: F811
    clock = [0.0]
    a = Lease(host, "node-a:1:extender", 30, monotonic=lambda: clock[0])
    b = Lease(host, "node-b:2:worker", 30)
    assert a.take()
    assert a.held
    assert not b.take()
    assert not b.held
    assert a.take(), "taking again is renewing"
    assert holder_of(host) == "node-a:1:extender"

    lapse(host)
    assert b.take(), "a lapsed lease is free"
    clock[0] = 31.0  # a wakes up: its lease ran out by its own clock too
    assert not a.held
    assert not a.renew(), "another took it over: a stops writing"
    b.release()
    assert holder_of(host) == ""
    assert a.take(), "a released lease is free at once"


@pytest.mark.django_db(transaction=True)
def test_racing_takers_never_both_hold_the_lease() -> None:
    cluster = HostCluster.objects.create(name="race", driver=HostCluster.Driver.KUBERNETES)
    PodWatch.objects.create(host_cluster=cluster, holder="gone:1:extender", held_until=timezone.now())
    start = threading.Barrier(6)
    won: list[bool] = []

    def take(n: int) -> None:
        try:
            start.wait()
            won.append(Lease(cluster, f"racer:{n}:worker", 30).take())
        finally:
            connection.close()

    racers = [threading.Thread(target=take, args=(n,)) for n in range(6)]
    for racer in racers:
        racer.start()
    for racer in racers:
        racer.join(10)
    assert sorted(won) == [False] * 5 + [True]
    assert holder_of(cluster).startswith("racer:")


# --- one watch: the extender's feed writes the view, the pass leaves it alone -------------------------


@pytest.mark.django_db(transaction=True)
def test_the_extenders_feed_writes_the_view_and_the_pass_opens_no_second_watch(
    host: HostCluster,  # noqa: F811
    vision: Tenant,  # noqa: F811
    kube_emulator: RunningEmulator,
) -> None:
    kube_emulator.put_object(gpu_pod("train-0", "h200-1", gpus=4))
    registry = Registry(watch_seconds=1)
    try:
        registry.start([host.name])
        wait_for(lambda: "train-0" in rows(host))
        assert holder_of(host).endswith(":extender")

        kube_emulator.put_object(gpu_pod("train-1", "h200-2", gpus=2))  # on the extender's watch
        api = api_of(kube_emulator)
        watches = len(kube_emulator.watch_log)
        outcome = live_pass(host, watch_seconds=1, api=api)
        assert outcome.held_by.endswith(":extender")
        assert api.calls == 0, "the pass neither lists nor watches: the extender's watch is the view's"
        wait_for(lambda: "train-1" in rows(host))
        assert all(w["path"] == "/api/v1/pods" for w in kube_emulator.watch_log[watches:])
        assert kube_emulator.open_watches() <= 1
        assert Pod.objects.get(host_cluster=host, name="train-1").gpu_class.name == "h200-141gb"
    finally:
        registry.stop(wait=5)

    assert holder_of(host) == "", "a stopped extender gives the lease back"
    kept = PodWatch.objects.get(host_cluster=host)
    assert kept.resource_version
    assert kept.synced_at is not None
    kube_emulator.put_object(gpu_pod("train-2", "h200-2", gpus=1))
    api = api_of(kube_emulator)
    outcome = live_pass(host, watch_seconds=1, api=api)
    assert not outcome.held_by
    assert not outcome.listed, "the pass resumes where the extender stopped"
    assert kube_emulator.watch_log[-1]["resourceVersion"] == kept.resource_version
    assert rows(host) == {"train-0", "train-1", "train-2"}
    assert holder_of(host) == "", "the pass gives the lease back for the extender's next list"


def test_a_pass_leaves_a_live_holder_alone_and_takes_over_when_its_lease_lapses(
    host: HostCluster,  # noqa: F811
    vision: Tenant,  # noqa: F811
    kube_emulator: RunningEmulator,
) -> None:
    extender = Lease(host, "extender-0:7:extender", 120)
    assert extender.take()
    kube_emulator.put_object(gpu_pod("train-0", "h200-1", gpus=1))
    api = api_of(kube_emulator)
    assert live_pass(host, watch_seconds=1, api=api).held_by == "extender-0:7:extender"
    assert api.calls == 0
    assert rows(host) == set()

    lapse(host)  # the extender died
    outcome = live_pass(host, watch_seconds=1, api=api)
    assert outcome.held_by == ""
    assert outcome.listed
    assert rows(host) == {"train-0"}
    assert not extender.renew(), "the dead holder, back, finds its lease taken"


def test_the_task_skips_a_cluster_the_extender_holds(
    host: HostCluster,  # noqa: F811
    kube_emulator: RunningEmulator,
    settings: Any,
) -> None:
    settings.LIVE_WATCH_SECONDS = 1
    Lease(host, "extender-0:7:extender", 120).take()
    kube_emulator.reset_counters()
    tasks.live_pass(host.pk)
    assert kube_emulator.calls == 0
    assert PodWatch.objects.get(host_cluster=host).listed_at is None


def test_a_view_whose_lease_was_taken_over_writes_nothing_until_its_next_list(
    host: HostCluster,  # noqa: F811
    vision: Tenant,  # noqa: F811
    kube_emulator: RunningEmulator,
) -> None:
    clock = [0.0]
    lease = Lease(host, "extender-0:7:extender", 30, monotonic=lambda: clock[0])
    view = LiveView(host, lease=lease)
    items = api_of(kube_emulator).get("/api/v1/pods")
    view.listed(items["items"], items["metadata"]["resourceVersion"])
    assert view.active
    lapse(host)
    assert Lease(host, "worker-1:9:worker", 30).take()
    clock[0] = 31.0
    pod = kube_emulator.put_object(gpu_pod("late", "h200-1", gpus=1))
    view.changed("ADDED", pod)
    assert not view.active
    assert rows(host) == set()
    view.listed([pod], pod["metadata"]["resourceVersion"])  # the other still holds it: nothing
    assert rows(host) == set()


# --- the watermark ----------------------------------------------------------------------------------


def test_the_watermark_is_the_list_time_then_each_event_and_bookmark_saved_in_batches(
    host: HostCluster,  # noqa: F811
    vision: Tenant,  # noqa: F811
    kube_emulator: RunningEmulator,
) -> None:
    now = [T0]
    view = LiveView(host, clock=lambda: now[0])
    view.listed([], "10")
    watch = PodWatch.objects.get(host_cluster=host)
    assert watch.synced_at == T0
    assert watch.listed_at == T0
    assert watch.resource_version == "10"

    now[0] = T0 + timedelta(seconds=1)
    pod = kube_emulator.put_object(gpu_pod("train-0", "h200-1", gpus=1))
    with CaptureQueriesContext(connection) as queries:
        view.changed("ADDED", pod)
    assert not [q for q in queries.captured_queries if "pod_watch" in q["sql"] or "podwatch" in q["sql"]]
    assert PodWatch.objects.get(host_cluster=host).synced_at == T0, "not saved per event"
    now[0] = T0 + timedelta(seconds=2)
    view.changed("BOOKMARK", {"kind": "Pod", "apiVersion": "v1", "metadata": {"resourceVersion": "99"}})
    view.save_position()
    watch = PodWatch.objects.get(host_cluster=host)
    assert (watch.synced_at, watch.resource_version) == (T0 + timedelta(seconds=2), "99")
    assert watch.listed_at == T0

    now[0] = T0 + timedelta(seconds=3 + SAVE_SECONDS)  # a long-running feed saves by itself
    view.changed("BOOKMARK", {"kind": "Pod", "apiVersion": "v1", "metadata": {"resourceVersion": "120"}})
    watch = PodWatch.objects.get(host_cluster=host)
    assert (watch.synced_at, watch.resource_version) == (now[0], "120")
    assert watch.events == 3


def test_a_pass_moves_the_watermark_to_its_list_and_then_its_events(
    host: HostCluster,  # noqa: F811
    vision: Tenant,  # noqa: F811
    kube_emulator: RunningEmulator,
) -> None:
    before = timezone.now()
    live_pass(host, watch_seconds=1, api=api_of(kube_emulator))
    watch = PodWatch.objects.get(host_cluster=host)
    listed = watch.synced_at
    assert listed is not None
    assert listed >= before
    assert watch.listed_at is not None
    assert listed < watch.listed_at, "the list's watermark is when it was asked for, not when it arrived"
    kube_emulator.put_object(gpu_pod("train-0", "h200-1", gpus=1))
    live_pass(host, watch_seconds=1, api=api_of(kube_emulator))
    moved = PodWatch.objects.get(host_cluster=host).synced_at
    assert moved is not None
    assert moved > listed


@pytest.mark.django_db(transaction=True)  # as in the extender: autocommit, a connection of its own
def test_a_failing_view_stands_down_and_never_stops_the_extenders_feed(
    host: HostCluster,  # noqa: F811
    vision: Tenant,  # noqa: F811
    kube_emulator: RunningEmulator,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api = api_of(kube_emulator)
    sink = ViewSink(host, ClaimStore(api), watch_seconds=1)
    pod = kube_emulator.put_object(gpu_pod("train-0", "h200-1", gpus=1))
    original = LiveView.listed

    def broken(self: LiveView, items: Any, version: str) -> None:
        raise DatabaseError("server closed the connection unexpectedly")

    monkeypatch.setattr(LiveView, "listed", broken)
    sink.listed([pod], pod["metadata"]["resourceVersion"])  # logged, not raised
    assert sink.view is not None
    assert not sink.view.active
    sink.changed("MODIFIED", pod)  # standing down: nothing written, nothing raised
    assert rows(host) == set()

    monkeypatch.setattr(LiveView, "listed", original)
    sink.listed([pod], pod["metadata"]["resourceVersion"])  # the next list takes the lease again
    assert sink.view.active
    assert rows(host) == {"train-0"}
    sink.close()
    assert holder_of(host) == ""


def test_a_bookmark_moves_the_watermark_of_a_quiet_cluster(
    host: HostCluster,  # noqa: F811
    vision: Tenant,  # noqa: F811
    kube_emulator: RunningEmulator,
) -> None:
    """No pod changes, but the API server's BOOKMARK as the watch ends says nothing was missed until then."""
    live_pass(host, watch_seconds=1, api=api_of(kube_emulator))
    listed = PodWatch.objects.get(host_cluster=host)
    assert listed.synced_at is not None
    assert kube_emulator.watch_log[-1]["allowWatchBookmarks"] == "true"

    kube_emulator.emulator.bookmarks = False
    outcome = live_pass(host, watch_seconds=1, api=api_of(kube_emulator))
    assert outcome.events == 0
    assert PodWatch.objects.get(host_cluster=host).synced_at == listed.synced_at, "no event: no news"

    kube_emulator.emulator.bookmarks = True
    other = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "tenant-vision"}}
    kube_emulator.put_object(other)  # a change, but not a pod's
    outcome = live_pass(host, watch_seconds=1, api=api_of(kube_emulator))
    assert outcome.events == 1
    moved = PodWatch.objects.get(host_cluster=host)
    assert moved.synced_at is not None
    assert moved.synced_at > listed.synced_at
    assert int(moved.resource_version) > int(listed.resource_version), "resumes from the bookmark"
