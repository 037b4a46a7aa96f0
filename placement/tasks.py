"""Celery tasks of placement: the live view's pass per Kubernetes host cluster. Each takes ids, re-reads
state, and is safe to run twice (a second pass of one host cluster meanwhile finds its lock busy). A pass
leaves a host cluster whose view's lease the scheduler extender holds (`placement.live.lease`): its feed
writes the view, and the pass opens no second watch."""

from __future__ import annotations

import logging

from django.conf import settings

from fleet.models import HostCluster
from fleet.selectors import SERVING
from gpucloud import celery as names
from gpucloud.celery import enqueue
from gpucloud.locks import LockBusy
from gpucloud.tasks import task
from placement.live.watch import live_pass as run_pass

log = logging.getLogger(__name__)


@task(names.LIVE_PASS, max_retries=2)
def live_pass(host_cluster_id: int) -> None:
    """Watch one host cluster's pods for a while (resuming where the last pass stopped) into the live view."""
    host_cluster = HostCluster.objects.filter(
        pk=host_cluster_id, driver=HostCluster.Driver.KUBERNETES
    ).first()
    if host_cluster is not None:
        try:
            outcome = run_pass(host_cluster, watch_seconds=int(settings.LIVE_WATCH_SECONDS))
        except LockBusy:
            return  # the pass before still watches: it is this pass
        if outcome.listed or outcome.writes:
            log.info("live view pass", extra={"host_cluster": host_cluster.name, **vars(outcome)})


@task(names.LIVE_PASS_ALL, max_retries=0)
def live_pass_all() -> None:
    """The periodic pass: one live-view pass per Kubernetes host cluster, each its own task."""
    kubernetes = HostCluster.objects.filter(SERVING, driver=HostCluster.Driver.KUBERNETES)  # not retired
    for host_cluster_id in kubernetes.values_list("pk", flat=True):
        enqueue(names.LIVE_PASS, host_cluster_id)
