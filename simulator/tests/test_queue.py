"""The simulator's queue: an ask that does not fit waits as a `PendingWorkload` row, across runs, until it is
placed; the tenant's queue lists it with an estimated start."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from clusters.queue import tenant_queue
from clusters.reconcile import tenants as reconcile
from core.audit import Actor
from fleet.models import Gpu, GpuClass, PendingWorkload, Pod
from simulator import workloads as simulator
from simulator.models import SimulatedClock
from tenants.services.quotas import set_quota

START = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)
H200 = "h200-141gb"


def minute(n: int) -> datetime:
    return START + timedelta(minutes=n)


@pytest.fixture
def tenant(make_tenant, demo_fleet, admin, settings):
    """A ready tenant with 16 H200s of quota on a demo fleet cut to one node of 8 (the rest quarantined)."""
    settings.SIMULATED_PROVISION_DELAY = 0
    made = make_tenant("q")
    set_quota(actor=Actor.of(admin), tenant=made, gpu_class=GpuClass.objects.get(name=H200), guaranteed=16)
    reconcile.reconcile_host_cluster(demo_fleet)
    Gpu.objects.exclude(node__name="h200-r1-0").update(health=Gpu.Health.QUARANTINED)
    made.refresh_from_db()
    return made


def arrival(at: int, name: str, sizes: tuple[int, ...], minutes: int) -> simulator.Arrival:
    return simulator.Arrival(minute(at), "q", H200, name, sizes, timedelta(minutes=minutes))


# The node's 8 GPUs go to `first` (minute 0 to 30); the gang `second` (2 pods of 4) arrives at minute 1 and
# waits for them; `small` (1 GPU) arrives at minute 35, when the gang holds the node, and waits for its end.
SCRIPT = {
    minute(0): [arrival(0, "first", (8,), 30)],
    minute(1): [arrival(1, "second", (4, 4), 10)],
    minute(35): [arrival(35, "small", (1,), 5)],
}


def advance(host_cluster, until: int) -> simulator.Summary:
    return simulator.advance(host_cluster, start=START, until=minute(until), seed=1, script=SCRIPT)


def pending_rows():
    return list(
        PendingWorkload.objects.order_by("name").values_list(
            "source", "namespace", "name", "gpu_class", "pods", "gpus", "created_at", "expected_seconds"
        )
    )


def test_a_waiting_ask_is_a_pending_row_that_survives_the_next_run_and_goes_once_placed(demo_fleet, tenant):
    summary = advance(demo_fleet, 5)

    expected = [("simulated", "tenant-q", "second", H200, 2, 8, minute(1), 600)]
    assert pending_rows() == expected
    assert summary.pending == 2
    row = PendingWorkload.objects.get()
    assert (row.tenant, row.topology_level) == (tenant, "rack")
    assert not Pod.objects.filter(name__startswith="second").exists()

    advance(demo_fleet, 20)  # a second run: read back, still waiting, the row untouched

    assert pending_rows() == expected
    assert PendingWorkload.objects.get().pk == row.pk

    advance(demo_fleet, 35)

    assert not PendingWorkload.objects.exists()
    gang = Pod.objects.filter(name__in=["second-0", "second-1"])
    assert [(p.started_at, p.created_at, p.ends_at) for p in gang] == [
        (minute(30), minute(1), minute(40))
    ] * 2


def test_one_minute_runs_keep_the_queue_as_one_long_run_does(demo_fleet, tenant):
    for n in range(1, 39):
        advance(demo_fleet, n)
    short = list(Pod.objects.order_by("name").values_list("name", "started_at", "finished_at"))
    queue = pending_rows()
    Pod.objects.all().delete()
    PendingWorkload.objects.all().delete()
    SimulatedClock.objects.all().delete()

    advance(demo_fleet, 38)

    assert list(Pod.objects.order_by("name").values_list("name", "started_at", "finished_at")) == short
    assert pending_rows() == queue == [("simulated", "tenant-q", "small", H200, 1, 1, minute(35), 300)]


def test_the_tenants_queue_lists_the_waiting_ask_with_its_estimated_start(demo_fleet, tenant):
    advance(demo_fleet, 5)

    [entry] = tenant_queue(tenant, at=minute(5))

    assert (entry.name, entry.source, entry.pods, entry.gpus, entry.position) == (
        "second",
        "simulated",
        2,
        8,
        1,
    )
    assert entry.estimated_start == minute(30)  # `first` ends then (its Pod.ends_at) and frees the node
    assert entry.scheduler_message


def test_a_scripted_ask_beyond_the_quota_is_refused_and_one_within_it_waits_for_the_tenants_own_pods(
    demo_fleet, tenant
):
    Gpu.objects.update(health=Gpu.Health.HEALTHY)  # room enough: only the quota of 16 holds them back
    script = {
        minute(0): [
            arrival(0, "a", (8,), 20),
            arrival(0, "b", (8,), 20),
            arrival(0, "c", (8,), 20),
            arrival(0, "huge", (8, 8, 8), 20),
        ]
    }

    summary = simulator.advance(demo_fleet, start=START, until=minute(5), seed=1, script=script)

    assert (summary.arrived, summary.refused, summary.placed) == (3, 3, 2)
    assert [r[2] for r in pending_rows()] == ["c"]
    [entry] = tenant_queue(tenant, at=minute(5))
    assert entry.estimated_start == minute(20)
    assert "own pods" in entry.reason


def test_a_workload_queued_ahead_holds_its_gpus_for_its_own_expected_runtime_in_the_estimate(
    demo_fleet, tenant
):
    script = {
        minute(0): [arrival(0, "first", (8,), 30)],
        minute(1): [arrival(1, "second", (8,), 10)],
        minute(2): [arrival(2, "third", (8,), 10)],
    }
    simulator.advance(demo_fleet, start=START, until=minute(5), seed=1, script=script)

    entries = tenant_queue(tenant, at=minute(5))

    # `second` starts when `first` ends (30) and holds the node for its 10 minutes (its row's
    # expected_seconds; no pod has finished yet, so no median runtime to fall back on): `third` then, at 40.
    assert [(e.name, e.estimated_start) for e in entries] == [("second", minute(30)), ("third", minute(40))]
