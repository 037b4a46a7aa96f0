"""Celery tasks of the reconciler and the simulated fleet. Each takes ids, re-reads state, and is safe to run
twice; all are declared with the one decorator, `gpucloud.tasks.task`.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from gpucloud import celery as names
from gpucloud.celery import enqueue
from gpucloud.tasks import task
from tenants.models import Tenant
from workers import reconcile, simulator

log = logging.getLogger(__name__)
# After a long pause (beat stopped), the periodic task simulates at most this much of the missed time.
CATCH_UP = timedelta(hours=1)


@task(names.RECONCILE_TENANT)
def reconcile_tenant(tenant_id: int) -> None:
    """The on-change shortcut: reconcile one tenant now, and again shortly while it is in transit."""
    tenant = Tenant.objects.select_related("cluster__host_cluster").filter(pk=tenant_id).first()
    if tenant is None or tenant.state == Tenant.State.DELETED:
        return
    outcome = reconcile.reconcile_host_cluster(tenant.cluster.host_cluster, [tenant_id])
    if tenant_id in outcome.transitional:
        enqueue(names.RECONCILE_TENANT, tenant_id, countdown=settings.REQUEUE_DELAY)


@task(names.RECONCILE_ALL, max_retries=2)
def reconcile_all() -> None:
    """The periodic, level-triggered pass over every host cluster."""
    for outcome in reconcile.reconcile_all().values():
        for tenant_id in outcome.transitional:
            enqueue(names.RECONCILE_TENANT, tenant_id, countdown=settings.REQUEUE_DELAY)


@task(names.AUDIT_STUCK, max_retries=0)
def report_stuck_tenants() -> None:
    """The auditor: tenants stuck in a transitional state past their deadline are logged loudly."""
    for tenant in reconcile.stuck_tenants(settings.STUCK_AFTER):
        log.error(
            "tenant is stuck",
            extra={"tenant": tenant.slug, "state": tenant.state, "since": tenant.updated_at.isoformat()},
        )


@task(names.SIMULATE_WORKLOADS, max_retries=2)
def simulate_workloads() -> None:
    """Advance the simulated fleet's workloads to now; minutes already simulated are skipped (safe twice)."""
    if not settings.SIM_WORKLOADS:
        return
    now = timezone.now()
    for host_cluster in simulator.simulated_host_clusters():
        summary = simulator.advance(host_cluster, until=now, seed=settings.SIM_SEED, catch_up=CATCH_UP)
        log.info("simulated workloads", extra={"host_cluster": host_cluster.name, **vars(summary)})
