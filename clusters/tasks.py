"""Celery tasks of the reconciler. Each takes ids, re-reads state, and is safe to run
twice; all are declared with the one decorator, `gpucloud.tasks.task`.
"""

from __future__ import annotations

import logging

from django.conf import settings

from clusters.access import rbac as access
from clusters.reconcile import coalesce
from clusters.reconcile import tenants as reconcile
from fleet.selectors import serving_host_clusters
from gpucloud import celery as names
from gpucloud.celery import enqueue
from gpucloud.tasks import task
from tenants.models import Tenant

log = logging.getLogger(__name__)


@task(names.RECONCILE_TENANT)
def reconcile_tenant(tenant_id: int) -> None:
    """The on-change shortcut: ask for a pass over the tenant's host cluster, unless one is pending already.

    A burst of changes (two hundred new tenants) thus costs one pass per host cluster, not one per tenant
    each queueing for the host cluster's lock.
    """
    host_cluster_id = (
        Tenant.objects.exclude(state=Tenant.State.DELETED)
        .filter(pk=tenant_id)
        .values_list("cluster__host_cluster_id", flat=True)
        .first()
    )
    if host_cluster_id is not None:
        _ask_for_pass(host_cluster_id, [tenant_id])


@task(names.RECONCILE_HOST_CLUSTER)
def reconcile_host_cluster(host_cluster_id: int) -> None:
    """One pass over the changed tenants of a host cluster; again shortly for those still in transit."""
    host_cluster = serving_host_clusters().filter(pk=host_cluster_id).first()
    if host_cluster is None:  # deleted or retired meanwhile: nothing to reconcile
        return
    tenant_ids = coalesce.begin_pass(host_cluster_id)
    if not tenant_ids:
        return
    try:
        outcome = reconcile.reconcile_host_cluster(host_cluster, tenant_ids)
    except Exception:  # LockBusy (another pass runs), the cluster away: the retry looks at them again
        coalesce.give_back(host_cluster_id, tenant_ids)
        raise
    if outcome.transitional:
        _ask_for_pass(host_cluster_id, outcome.transitional, countdown=settings.REQUEUE_DELAY)
    # Then the bindings inside the changed tenants' vClusters (membership changes come this way).
    access.sync_due(access.tenants_of(host_cluster_id, tenant_ids))


def _ask_for_pass(host_cluster_id: int, tenant_ids: list[int], countdown: float | None = None) -> None:
    coalesce.note_change(host_cluster_id, tenant_ids)
    if coalesce.request_pass(host_cluster_id):
        enqueue(names.RECONCILE_HOST_CLUSTER, host_cluster_id, countdown=countdown)


@task(names.RECONCILE_ALL, max_retries=0)
def reconcile_all() -> None:
    """The periodic, level-triggered pass: one full pass per host cluster in service (a retired one is left
    alone), each its own task, so a host cluster whose lock is busy or that does not answer holds up no other
    (as `health_pass_all`)."""
    for host_cluster_id in serving_host_clusters().values_list("pk", flat=True):
        enqueue(names.FULL_PASS, host_cluster_id)


@task(names.FULL_PASS, max_retries=2)
def full_pass(host_cluster_id: int) -> None:
    """Every tenant of one host cluster compared with the cluster, objects of tenants gone pruned; again
    shortly for those still in transit. A busy lock or an unreachable cluster is retried, then left to the
    next periodic pass."""
    host_cluster = serving_host_clusters().filter(pk=host_cluster_id).first()
    if host_cluster is None:  # deleted or retired meanwhile: nothing to reconcile
        return
    outcome = reconcile.reconcile_host_cluster(host_cluster)
    if outcome.transitional:
        _ask_for_pass(host_cluster_id, outcome.transitional, countdown=settings.REQUEUE_DELAY)
    access.sync_due(access.tenants_of(host_cluster_id))


@task(names.AUDIT_STUCK, max_retries=0)
def report_stuck_tenants() -> None:
    """The auditor: tenants stuck in a transitional state past their deadline are logged loudly."""
    for tenant in reconcile.stuck_tenants(settings.STUCK_AFTER):
        log.error(
            "tenant is stuck",
            extra={"tenant": tenant.slug, "state": tenant.state, "since": tenant.updated_at.isoformat()},
        )
