"""The simulated fleet's workloads: placed by the engine, within quotas, deterministic by seed."""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from clusters.reconcile import tenants as reconcile
from core.audit import Actor
from fleet.models import Gpu, GpuClass, Node, PendingWorkload, Pod
from simulator import tasks
from simulator import workloads as simulator
from simulator.models import SimulatedClock
from tenants.models import Quota, Tenant
from tenants.services.quotas import set_quota

START = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)


@pytest.fixture
def tenants(make_tenant, demo_fleet, admin, settings):
    """Ready tenants of every trust tier with whole, MIG and shared quotas on the demo fleet."""
    settings.SIMULATED_PROVISION_DELAY = 0
    as_admin = Actor.of(admin)
    made = {
        "std": make_tenant("std"),
        "tru": make_tenant("tru", trust_tier="trusted"),
        "tru2": make_tenant("tru2", trust_tier="trusted"),
        "iso": make_tenant("iso", trust_tier="isolated"),
    }
    quotas = {
        "std": [("h200-141gb", 8, 8), ("h200-141gb.mig-1g.18gb", 7, 7)],
        "tru": [("h200-141gb.shared", 8, 4), ("a100-80gb", 8, 8)],
        "tru2": [("h200-141gb.shared", 8, 4), ("a100-80gb.shared", 4, 4)],
        "iso": [("h200-141gb", 16, 0)],
    }
    for slug, rows in quotas.items():
        for name, guaranteed, burst in rows:
            gpu_class = GpuClass.objects.get(name=name)
            set_quota(
                actor=as_admin, tenant=made[slug], gpu_class=gpu_class, guaranteed=guaranteed, burst=burst
            )
    # A MIG quota of an isolated tenant, as written before admission enforced trust tiers (it refuses one
    # now): the simulator must still give the isolated tenant whole GPUs only.
    mig = GpuClass.objects.get(name="h200-141gb.mig-1g.18gb")
    Quota.objects.create(tenant=made["iso"], gpu_class=mig, guaranteed=7)
    reconcile.reconcile_host_cluster(demo_fleet)
    assert set(Tenant.objects.values_list("state", flat=True)) == {"ready"}
    return made


def replay(host_cluster, hours=2, seed=7, start=START):
    return simulator.advance(host_cluster, start=start, until=start + timedelta(hours=hours), seed=seed)


def rows():
    return list(
        Pod.objects.order_by("namespace", "name").values_list(
            "namespace",
            "name",
            "node__name",
            "gpu_uuids",
            "gpu_instance_id",
            "gpu_milli",
            "started_at",
            "finished_at",
        )
    )


def forget():
    """Back to the database state before any run: no pods, no queue, no clock."""
    Pod.objects.all().delete()
    PendingWorkload.objects.all().delete()
    SimulatedClock.objects.all().delete()


def live_at(at):
    return [
        p
        for p in Pod.objects.select_related("tenant", "gpu_class", "node")
        if p.started_at <= at and (p.finished_at is None or p.finished_at > at)
    ]


def test_the_same_seed_gives_the_same_pods_and_another_seed_other_pods(demo_fleet, tenants):
    summary = replay(demo_fleet, seed=7)
    first = rows()
    forget()
    replay(demo_fleet, seed=7)
    assert rows() == first
    assert summary.placed == len(first) > 20

    forget()
    replay(demo_fleet, seed=8)
    assert rows() != first


def test_pods_start_and_finish_and_every_pod_is_recorded_in_full(demo_fleet, tenants):
    summary = replay(demo_fleet)

    pods = list(Pod.objects.select_related("gpu_class"))
    assert summary.steps == 120
    assert summary.finished > 0
    assert sum(p.finished_at is not None for p in pods) == summary.finished
    for pod in pods:
        assert pod.finished_at is None or pod.finished_at > pod.started_at
        assert pod.namespace == f"tenant-{pod.tenant.slug}"
        assert pod.gpu_uuids
        if pod.gpu_class.kind == "mig":
            assert pod.gpu_instance_id is not None
            assert len(pod.gpu_uuids) == 1
            assert pod.mig_layout
        else:
            assert pod.gpu_instance_id is None
            assert pod.gpu_milli == (250 if pod.gpu_class.kind == "shared" else 1000)
    kinds = {p.gpu_class.kind for p in pods}
    assert kinds == {"whole", "mig", "shared"}


def test_no_tenant_ever_holds_more_than_guaranteed_plus_burst(demo_fleet, tenants):
    replay(demo_fleet)

    limits = {(q.tenant_id, q.gpu_class_id): q.guaranteed + q.burst for q in Quota.objects.all()}
    for minute in range(0, 120, 5):
        held: dict[tuple[int, int], int] = defaultdict(int)
        for pod in live_at(START + timedelta(minutes=minute)):
            held[(pod.tenant_id, pod.gpu_class_id)] += (
                len(pod.gpu_uuids) if pod.gpu_class.kind == "whole" else 1
            )
        assert all(units <= limits[key] for key, units in held.items()), minute


def test_every_tenancy_rule_holds_at_every_minute(demo_fleet, tenants):
    replay(demo_fleet)

    isolated_nodes = {p.node_id for p in Pod.objects.filter(tenant__slug="iso")}
    assert isolated_nodes
    assert Pod.objects.filter(tenant__slug="iso", gpu_class__kind="whole").count()
    assert not Pod.objects.filter(tenant__slug="iso").exclude(gpu_class__kind="whole").exists()
    for minute in range(0, 120, 4):
        by_gpu = defaultdict(set)
        instances = defaultdict(set)
        for pod in live_at(START + timedelta(minutes=minute)):
            if pod.node_id in isolated_nodes:
                assert pod.tenant.slug == "iso", "a dedicated node runs only its tenant's pods"
            for uuid in pod.gpu_uuids:
                if pod.gpu_instance_id is None:
                    by_gpu[uuid].add(pod.tenant)
                else:
                    key = (uuid, pod.gpu_instance_id)
                    assert key not in instances, "one MIG instance, one pod"
                    instances[key].add(pod.tenant)
        for uuid, holders in by_gpu.items():
            assert uuid not in {u for u, _ in instances}, "a MIG GPU takes no whole or shared pods"
            assert len(holders) == 1 or all(t.trust_tier == "trusted" for t in holders), uuid


def test_quarantined_hardware_gets_no_new_pods(demo_fleet, tenants):
    Node.objects.filter(name__in=["h200-r1-3", "a100-r3-4"]).update(state=Node.State.QUARANTINED)
    Gpu.objects.filter(node__name="h200-r2-0").update(health=Gpu.Health.QUARANTINED)

    replay(demo_fleet, hours=2)

    assert Pod.objects.count() > 10
    assert not Pod.objects.filter(node__name__in=["h200-r1-3", "a100-r3-4", "h200-r2-0"]).exists()


def test_a_gang_lands_all_at_once(demo_fleet, tenants):
    replay(demo_fleet, hours=3)

    gangs = defaultdict(list)
    for pod in Pod.objects.filter(name__regex=r"^sim-\d+-\d+-\d+$"):
        gangs[pod.name.rsplit("-", 1)[0]].append(pod)
    assert gangs
    for members in gangs.values():
        assert len(members) >= 2
        assert len({p.started_at for p in members}) == 1


def test_running_twice_over_the_same_span_adds_nothing(demo_fleet, tenants):
    replay(demo_fleet, hours=1)
    first = rows()

    again = replay(demo_fleet, hours=1)

    assert again.steps == 0
    assert rows() == first


def test_pods_that_do_not_fit_stay_pending_and_are_counted(demo_fleet, tenants):
    Gpu.objects.exclude(node__name="a100-r3-0").update(health=Gpu.Health.QUARANTINED)

    summary = replay(demo_fleet, hours=1)

    assert summary.pending > 0
    assert summary.arrived > summary.placed
    rows = PendingWorkload.objects.filter(host_cluster=demo_fleet, source="simulated")
    assert sum(rows.values_list("pods", flat=True)) == summary.pending
    waiting = set(rows.values_list("namespace", "name"))

    again = replay(demo_fleet, hours=1, start=START + timedelta(hours=1))

    # The next run starts with them: each is placed (a pod of its name, a gang's with -0, -1, …) or waits on.
    assert again.placed + again.pending == again.arrived + summary.pending
    later = Pod.objects.filter(started_at__gte=START + timedelta(hours=1))
    placed = {(p.namespace, "-".join(p.name.split("-")[:3])) for p in later}
    assert waiting <= placed | set(rows.values_list("namespace", "name"))
    assert waiting & placed


def test_the_command_replays_hours_from_a_start_and_then_continues(demo_fleet, tenants):
    out = StringIO()
    call_command(
        "simulate_workloads", "--hours", "1", "--seed", "3", "--start", "2026-03-02T08:00:00Z", stdout=out
    )
    call_command("simulate_workloads", "--hours", "0.5", "--seed", "3", stdout=out)

    assert "demo: 60 minutes from 2026-03-02T08:00:00+00:00" in out.getvalue()
    assert "demo: 30 minutes from 2026-03-02T09:00:00+00:00" in out.getvalue()
    assert SimulatedClock.objects.get().until == START + timedelta(minutes=90)
    with pytest.raises(CommandError, match="not an ISO 8601 instant"):
        call_command("simulate_workloads", "--hours", "1", "--start", "yesterday")


def test_the_periodic_task_advances_to_now_and_is_off_when_switched_off(demo_fleet, tenants, settings):
    settings.SIM_WORKLOADS = False
    tasks.simulate_workloads()
    assert not SimulatedClock.objects.exists()

    settings.SIM_WORKLOADS = True
    tasks.simulate_workloads()
    clock = SimulatedClock.objects.get()
    tasks.simulate_workloads()
    assert SimulatedClock.objects.get().until >= clock.until
    assert clock.until == simulator.floor_step(clock.until)
