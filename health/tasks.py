"""Celery tasks of health: the periodic health pass per host cluster, and telling people of a quarantine.
Each takes ids, re-reads state, and is safe to run twice."""

from __future__ import annotations

import logging

from fleet.selectors import serving_host_clusters
from gpucloud import celery as names
from gpucloud.celery import enqueue
from gpucloud.tasks import task
from health import node_pass
from health.services import alerts

log = logging.getLogger(__name__)


@task(names.HEALTH_PASS, max_retries=3)
def health_pass(host_cluster_id: int) -> None:
    """Node conditions in, quarantine (cordon, taint, maybe drain) out, for one host cluster."""
    host_cluster = serving_host_clusters().filter(pk=host_cluster_id).first()  # a retired one: none
    if host_cluster is not None:
        outcome = node_pass.health_pass(host_cluster)
        if outcome.writes or outcome.released or outcome.evictions:
            log.info("health pass", extra=vars(outcome))


@task(names.HEALTH_PASS_ALL, max_retries=0)
def health_pass_all() -> None:
    """The periodic pass: one health pass per host cluster in service (not retired), each its own task (one
    unreachable cluster holds up no other)."""
    for host_cluster_id in serving_host_clusters().values_list("pk", flat=True):
        enqueue(names.HEALTH_PASS, host_cluster_id)


@task(names.HEALTH_NOTIFY, max_retries=2)
def health_notify(quarantine_id: int) -> None:
    """Tell the platform administrators about a quarantine (webhook, e-mail)."""
    alerts.notify(quarantine_id)
