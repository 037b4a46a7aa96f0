"""Billing's periodic tasks, declared with the one task decorator (`gpucloud.tasks.task`)."""

from __future__ import annotations

import logging

from billing import collect
from billing.services import budgets
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


@task(names.CHECK_BUDGETS, max_retries=2)
def check_budgets() -> None:
    """Raise the budget alerts the month's spend has crossed; safe to run twice (one alert per threshold)."""
    budgets.check_budgets()
