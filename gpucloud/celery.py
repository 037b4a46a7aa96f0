"""The Celery app, its routing table and schedule, and the one way services ask for background work.

Services never import `workers` (it sits above them); they enqueue by task name with `enqueue`.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpucloud.settings")

log = logging.getLogger(__name__)

app = Celery("gpucloud")
app.config_from_object("django.conf:settings", namespace="CELERY")

RECONCILE_TENANT = "workers.reconcile_tenant"
RECONCILE_HOST_CLUSTER = "workers.reconcile_host_cluster"
RECONCILE_ALL = "workers.reconcile_all"
FULL_PASS = "workers.full_pass"
AUDIT_STUCK = "workers.report_stuck_tenants"
SIMULATE_WORKLOADS = "workers.simulate_workloads"
COLLECT_USAGE = "billing.collect_usage"
INGEST_HELD = "billing.ingest_held"
CHECK_BUDGETS = "billing.check_budgets"
SYNC_GITOPS_DUE = "gitops.sync_due_sources"
SYNC_GITOPS_SOURCE = "gitops.sync_source"
MAINTAIN_LEDGER = "billing.maintain_ledger"
CHECK_IDLE = "billing.check_idle"
HEALTH_PASS = "workers.health_pass"
HEALTH_PASS_ALL = "workers.health_pass_all"
HEALTH_NOTIFY = "workers.health_notify"
LIVE_PASS = "placement.live_pass"
LIVE_PASS_ALL = "placement.live_pass_all"

app.conf.update(
    task_acks_late=True,
    task_reject_on_worker_lost=True,
    worker_prefetch_multiplier=1,
    task_ignore_result=True,
    result_backend=None,
    task_default_queue="default",
    task_routes={
        RECONCILE_TENANT: {"queue": "reconcile"},
        RECONCILE_HOST_CLUSTER: {"queue": "reconcile"},
        RECONCILE_ALL: {"queue": "reconcile"},
        FULL_PASS: {"queue": "reconcile"},
        AUDIT_STUCK: {"queue": "default"},
        SIMULATE_WORKLOADS: {"queue": "default"},
        COLLECT_USAGE: {"queue": "default"},
        INGEST_HELD: {"queue": "default"},
        CHECK_BUDGETS: {"queue": "default"},
        SYNC_GITOPS_DUE: {"queue": "default"},
        SYNC_GITOPS_SOURCE: {"queue": "default"},
        MAINTAIN_LEDGER: {"queue": "default"},
        CHECK_IDLE: {"queue": "default"},
        HEALTH_PASS: {"queue": "reconcile"},
        HEALTH_PASS_ALL: {"queue": "reconcile"},
        HEALTH_NOTIFY: {"queue": "default"},
        LIVE_PASS: {"queue": "default"},
        LIVE_PASS_ALL: {"queue": "default"},
    },
    broker_connection_retry_on_startup=True,
)


def enqueue(name: str, *args: Any, countdown: float | None = None) -> bool:
    """Send a task; if the broker is down, log and carry on — the periodic pass will catch up."""
    try:
        app.send_task(name, args=args, countdown=countdown)
    except Exception as exc:  # broker errors come in many types (kombu, redis, OSError)
        log.warning("could not enqueue %s: %s; the periodic reconcile will pick it up", name, exc)
        return False
    return True


def enqueue_tenant_reconcile(tenant_id: int) -> bool:
    return enqueue(RECONCILE_TENANT, tenant_id)
