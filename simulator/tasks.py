"""The simulated fleet's periodic task: advance every simulated host cluster's workload to now."""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from gpucloud import celery as names
from gpucloud.tasks import task
from simulator import workloads as simulator

log = logging.getLogger(__name__)
# After a long pause (beat stopped), the periodic task simulates at most this much of the missed time.
CATCH_UP = timedelta(hours=1)


@task(names.SIMULATE_WORKLOADS, max_retries=2)
def simulate_workloads() -> None:
    """Advance the simulated fleet's workloads to now; minutes already simulated are skipped (safe twice)."""
    if not settings.SIM_WORKLOADS:
        return
    now = timezone.now()
    for host_cluster in simulator.simulated_host_clusters():
        summary = simulator.advance(host_cluster, until=now, seed=settings.SIM_SEED, catch_up=CATCH_UP)
        log.info("simulated workloads", extra={"host_cluster": host_cluster.name, **vars(summary)})
