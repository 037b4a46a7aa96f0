"""Billing's periodic tasks, declared with the one task decorator (`gpucloud.tasks.task`)."""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from billing import collect
from billing import ledger_partitions as partitions
from billing.services import budgets, idle
from fleet.models import HostCluster
from gpucloud import celery as names
from gpucloud.tasks import task

log = logging.getLogger(__name__)


@task(names.COLLECT_USAGE, max_retries=0)
def collect_usage() -> None:
    """One metering round of every host cluster. Not retried: the next round comes in METER_INTERVAL, and a
    late retry would only add late samples."""
    for cluster, records in collect.collect_all().items():
        failed = [n for n, r in records.items() if r.status != "ok"]
        if failed:
            log.warning("metering round incomplete", extra={"host_cluster": cluster, "nodes": failed[:20]})


@task(names.INGEST_HELD, max_retries=0)
def ingest_held(host_cluster_id: int) -> None:
    """A Kubernetes host cluster's held rounds, a few seconds after the pass that took them: those the live
    view has caught up with by then are billed without waiting for the next pass. Not retried: the next pass
    does it."""
    host_cluster = HostCluster.objects.filter(pk=host_cluster_id).first()
    if host_cluster is not None:
        collect.ingest_held(host_cluster, timezone.now())


@task(names.CHECK_BUDGETS, max_retries=2)
def check_budgets() -> None:
    """Raise the budget alerts the month's spend has crossed; safe to run twice (one alert per threshold)."""
    budgets.check_budgets()


@task(names.MAINTAIN_LEDGER, max_retries=2)
def maintain_ledger() -> None:
    """Create the ledger's coming monthly partitions; drop months past retention that are wholly invoiced."""
    now = timezone.now()
    created = partitions.create_ahead(now)
    dropped = []
    if settings.LEDGER_RETENTION_DAYS:
        dropped = partitions.drop_expired(now, timedelta(days=settings.LEDGER_RETENTION_DAYS))
    if created or dropped:
        log.info(
            "ledger partitions",
            extra={
                "months_created": [f"{m:%Y-%m}" for m in created],
                "months_dropped": [f"{m:%Y-%m}" for m in dropped],
            },
        )


@task(names.CHECK_IDLE, max_retries=2)
def check_idle() -> None:
    """Flag tenants whose GPUs sat idle for the window, put those that opted in to sleep, wake the busy."""
    counts = idle.check_idle()
    if any(counts.values()):
        log.info("idle tenants", extra=counts)
