"""A burst of changes on one host cluster costs one pass over it, not one per change
(clusters/reconcile/coalesce.py)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.utils import timezone

from clusters import tasks
from clusters.models import PassRequest
from clusters.reconcile import coalesce
from clusters.reconcile import tenants as reconcile
from gpucloud import celery as names
from gpucloud.locks import LockBusy
from gpucloud.observability import RECONCILE_RUNS
from tenants.models import Tenant


@pytest.fixture
def enqueued(monkeypatch):
    """What the tasks enqueue, instead of sending it to the broker."""
    sent: list[tuple[Any, ...]] = []
    monkeypatch.setattr(tasks, "enqueue", lambda name, *args, countdown=None: sent.append((name, *args)))
    return sent


@pytest.fixture
def instant(settings):
    settings.SIMULATED_PROVISION_DELAY = 0
    settings.SIMULATED_DELETE_DELAY = 0


def test_a_burst_of_changes_on_one_host_cluster_asks_for_one_pass(make_tenant, demo_fleet, enqueued, instant):
    tenants = [make_tenant(f"burst-{i}") for i in range(20)]
    for tenant in tenants:
        tasks.reconcile_tenant(tenant.pk)
    assert enqueued == [(names.RECONCILE_HOST_CLUSTER, demo_fleet.pk)]

    tasks.reconcile_host_cluster(demo_fleet.pk)
    assert set(Tenant.objects.filter(slug__startswith="burst-").values_list("state", flat=True)) == {"ready"}
    assert enqueued == [(names.RECONCILE_HOST_CLUSTER, demo_fleet.pk)]  # nothing left in transit


def test_a_change_after_the_pass_began_asks_for_a_pass_of_its_own(make_tenant, demo_fleet, enqueued):
    first = make_tenant("first")
    tasks.reconcile_tenant(first.pk)
    coalesce.begin_pass(demo_fleet.pk)  # the pass has read nothing yet; what changes now it may not see
    second = make_tenant("second")
    tasks.reconcile_tenant(second.pk)
    assert enqueued == [(names.RECONCILE_HOST_CLUSTER, demo_fleet.pk)] * 2


def test_each_host_cluster_gets_its_own_pass(make_tenant, demo_fleet, small_fleet, enqueued):
    on_demo = make_tenant("on-demo")
    on_small = make_tenant("on-small", host_cluster=small_fleet)
    for tenant in (on_demo, on_small, on_demo, on_small):
        tasks.reconcile_tenant(tenant.pk)
    assert sorted(enqueued) == sorted(
        [(names.RECONCILE_HOST_CLUSTER, demo_fleet.pk), (names.RECONCILE_HOST_CLUSTER, small_fleet.pk)]
    )


def test_a_pass_asked_for_long_ago_that_never_ran_is_asked_for_again(make_tenant, demo_fleet, enqueued):
    tenant = make_tenant("lost")
    tasks.reconcile_tenant(tenant.pk)
    assert coalesce.request_pass(demo_fleet.pk) is False  # pending
    PassRequest.objects.update(requested_at=timezone.now() - coalesce.STALE * 2)
    tasks.reconcile_tenant(tenant.pk)  # the broker lost the first: this one enqueues again
    assert enqueued == [(names.RECONCILE_HOST_CLUSTER, demo_fleet.pk)] * 2


def test_a_pass_looks_only_at_the_tenants_that_changed(
    make_tenant, demo_fleet, enqueued, instant, monkeypatch
):
    tenants = [make_tenant(f"calm-{i}") for i in range(5)]
    for tenant in tenants:
        tasks.reconcile_tenant(tenant.pk)
    tasks.reconcile_host_cluster(demo_fleet.pk)
    seen = []
    real = reconcile.reconcile_host_cluster

    def spy(host_cluster, tenant_ids=None):
        seen.append(tenant_ids)
        return real(host_cluster, tenant_ids)

    monkeypatch.setattr(reconcile, "reconcile_host_cluster", spy)
    tasks.reconcile_tenant(tenants[2].pk)
    tasks.reconcile_host_cluster(demo_fleet.pk)
    assert seen == [[tenants[2].pk]]


def test_a_pass_that_finds_the_lock_taken_gives_its_tenants_back_for_the_retry(
    make_tenant, demo_fleet, enqueued
):
    tenant = make_tenant("waiting")
    tasks.reconcile_tenant(tenant.pk)

    def busy(host_cluster, ids=None):
        raise LockBusy("another pass runs")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(reconcile, "reconcile_host_cluster", busy)
        with pytest.raises(LockBusy):
            tasks.reconcile_host_cluster(demo_fleet.pk)
    assert coalesce.begin_pass(demo_fleet.pk) == [tenant.pk]


@pytest.mark.worker
def test_a_burst_of_new_tenants_converges_in_a_few_passes_on_a_real_worker(
    make_tenant, demo_fleet, celery_worker, settings
):
    settings.SIMULATED_PROVISION_DELAY = 0.5
    settings.REQUEUE_DELAY = 0.2
    passes = RECONCILE_RUNS.labels("simulated", "ok")
    before = passes._value.get()
    for i in range(30):
        make_tenant(f"wave-{i}")  # each commits and enqueues its reconcile, as the API does
    deadline = time.monotonic() + 60
    while Tenant.objects.filter(slug__startswith="wave-").exclude(state="ready").exists():
        assert time.monotonic() < deadline, "the burst did not converge within 60 s"
        time.sleep(0.1)
    # pending → provisioning, then ready once the simulated delay has passed: a handful of passes, not 30+.
    assert passes._value.get() - before <= 8
