"""The tenant reconciler on the simulated driver."""

import threading
from datetime import timedelta

import pytest
from django import db
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from clusters.models import SimulatedTenantCluster
from clusters.reconcile import tenants as reconcile
from core.audit import Actor
from core.models import AuditEvent
from fleet.models import GpuClass
from gpucloud.locks import LockBusy, exclusive
from tenants.models import Tenant
from tenants.services import lifecycle, quotas

WRITES = ("INSERT", "UPDATE", "DELETE")


def writes_during(fn):
    with CaptureQueriesContext(connection) as queries:
        outcome = fn()
    return outcome, [q["sql"] for q in queries if q["sql"].lstrip().upper().startswith(WRITES)]


@pytest.fixture
def instant(settings):
    settings.SIMULATED_PROVISION_DELAY = 0
    settings.SIMULATED_DELETE_DELAY = 0


def test_a_new_tenant_becomes_ready(make_tenant, demo_fleet, instant):
    tenant = make_tenant("vision")
    reconcile.reconcile_host_cluster(demo_fleet)

    tenant.refresh_from_db()
    assert tenant.state == Tenant.State.READY
    assert tenant.cluster.state == "ready"
    assert tenant.cluster.endpoint == "https://vision.demo.gpucloud.internal"


def test_each_lifecycle_step_is_audited_as_the_state_it_changed_and_nothing_else(
    make_tenant, demo_fleet, instant
):
    make_tenant("vision")
    reconcile.reconcile_host_cluster(demo_fleet)
    steps = AuditEvent.objects.filter(action__in=["tenant.provisioning", "tenant.ready"]).order_by("id")
    assert [e.changes() for e in steps] == [
        [{"field": "state", "before": "pending", "after": "provisioning"}],
        [{"field": "state", "before": "provisioning", "after": "ready"}],
    ]


def test_a_tenant_provisions_for_the_configured_delay(make_tenant, demo_fleet, settings):
    settings.SIMULATED_PROVISION_DELAY = 3600
    tenant = make_tenant("vision")
    outcome = reconcile.reconcile_host_cluster(demo_fleet)

    tenant.refresh_from_db()
    assert tenant.state == Tenant.State.PROVISIONING
    assert outcome.transitional == [tenant.pk]


def test_running_the_reconciler_twice_on_an_unchanged_tenant_writes_nothing(
    make_tenant, demo_fleet, instant, admin
):
    tenant = make_tenant("vision")
    quotas.set_quota(
        actor=Actor.of(admin), tenant=tenant, gpu_class=GpuClass.objects.get(name="h200-141gb"), guaranteed=8
    )
    reconcile.reconcile_host_cluster(demo_fleet)

    outcome, writes = writes_during(lambda: reconcile.reconcile_host_cluster(demo_fleet))
    assert writes == []
    assert outcome.result.writes == 0
    assert outcome.db_writes == 0
    _, writes = writes_during(lambda: reconcile.reconcile_host_cluster(demo_fleet, [tenant.pk]))
    assert writes == []


def test_a_quota_change_is_applied_once(make_tenant, demo_fleet, instant, admin):
    tenant = make_tenant("vision")
    reconcile.reconcile_host_cluster(demo_fleet)
    quotas.set_quota(
        actor=Actor.of(admin), tenant=tenant, gpu_class=GpuClass.objects.get(name="h200-141gb"), guaranteed=8
    )

    first = reconcile.reconcile_host_cluster(demo_fleet)
    second = reconcile.reconcile_host_cluster(demo_fleet)
    assert first.result.writes == 1
    assert second.result.writes == 0
    assert SimulatedTenantCluster.objects.get().quotas[0]["guaranteed"] == 8


def test_suspend_resume_and_delete_drive_the_simulated_cluster(make_tenant, demo_fleet, instant, admin):
    tenant = make_tenant("vision")
    reconcile.reconcile_host_cluster(demo_fleet)
    tenant.refresh_from_db()

    lifecycle.suspend_tenant(actor=Actor.of(admin), tenant=tenant)
    reconcile.reconcile_host_cluster(demo_fleet)
    assert SimulatedTenantCluster.objects.get().suspended
    tenant.refresh_from_db()
    assert tenant.cluster.state == "suspended"

    lifecycle.resume_tenant(actor=Actor.of(admin), tenant=tenant)
    reconcile.reconcile_host_cluster(demo_fleet)
    tenant.refresh_from_db()
    assert tenant.state == Tenant.State.READY
    assert not SimulatedTenantCluster.objects.get().suspended

    lifecycle.delete_tenant(actor=Actor.of(admin), tenant=tenant)
    reconcile.reconcile_host_cluster(demo_fleet)
    tenant.refresh_from_db()
    assert tenant.state == Tenant.State.DELETED
    assert tenant.deleted_at is not None
    assert tenant.cluster.state == "deleted"
    assert not SimulatedTenantCluster.objects.exists()


def test_a_reconcile_killed_after_the_cluster_changed_is_completed_by_the_next(
    make_tenant, demo_fleet, instant
):
    tenant = make_tenant("vision")
    # The worker created the simulated cluster, then died before writing back what it saw.
    now = timezone.now()
    SimulatedTenantCluster.objects.create(
        host_cluster=demo_fleet,
        slug="vision",
        namespace="tenant-vision",
        endpoint="https://x",
        created_at=now,
        ready_at=now - timedelta(seconds=1),
    )
    reconcile.reconcile_host_cluster(demo_fleet)

    tenant.refresh_from_db()
    assert tenant.state == Tenant.State.READY
    assert SimulatedTenantCluster.objects.count() == 1


def test_a_full_pass_prunes_clusters_no_tenant_owns(make_tenant, demo_fleet, instant):
    now = timezone.now()
    SimulatedTenantCluster.objects.create(
        host_cluster=demo_fleet,
        slug="ghost",
        namespace="tenant-ghost",
        endpoint="",
        created_at=now,
        ready_at=now,
    )
    make_tenant("vision")
    reconcile.reconcile_host_cluster(demo_fleet)

    assert list(SimulatedTenantCluster.objects.values_list("slug", flat=True)) == ["vision"]


def test_a_pass_over_some_tenants_reads_only_their_simulated_clusters(
    make_tenant, demo_fleet, instant, monkeypatch, admin
):
    vision, *_ = [make_tenant(slug) for slug in ("vision", "speech", "audio")]
    reconcile.reconcile_host_cluster(demo_fleet)  # all three ready: three rows
    read = []
    from_db = SimulatedTenantCluster.from_db.__func__  # type: ignore[attr-defined]

    def counted(cls, *args):
        read.append(args)
        return from_db(cls, *args)

    monkeypatch.setattr(SimulatedTenantCluster, "from_db", classmethod(counted))
    lifecycle.update_tenant(actor=Actor.of(admin), tenant=vision, display_name="Vision")
    reconcile.reconcile_host_cluster(demo_fleet, [vision.pk])

    # The on-change pass of one tenant among a thousand must not read the other 999 rows.
    assert len(read) == 1
    assert SimulatedTenantCluster.objects.count() == 3


@pytest.mark.django_db(transaction=True)
def test_a_second_reconcile_of_the_same_host_cluster_waits(demo_fleet):
    held, release = threading.Event(), threading.Event()

    def other_worker():  # another process's reconcile, on its own database connection
        try:
            with exclusive(f"reconcile:host-cluster:{demo_fleet.pk}"):
                held.set()
                release.wait(10)
        finally:
            db.connection.close()

    thread = threading.Thread(target=other_worker)
    thread.start()
    try:
        assert held.wait(10)
        with pytest.raises(LockBusy):
            reconcile.reconcile_host_cluster(demo_fleet)
    finally:
        release.set()
        thread.join()
    reconcile.reconcile_host_cluster(demo_fleet)  # free again
