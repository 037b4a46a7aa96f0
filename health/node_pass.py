"""The health pass of a host cluster: node conditions in, the quarantine out onto the cluster.

Level-triggered like the tenant reconciler: every `HEALTH_PASS_INTERVAL` (and right after a quarantine or a
release, as a shortcut into the same function) it lists the GPU nodes of a Kubernetes host cluster once, hands
their conditions to `health.services.observe.observe_nodes`, releases what has been clean long enough
(`health.services.quarantines`), and makes every node carry the quarantine the database says
(`health.node_driver`). On the simulated fleet the
database is the whole truth, so the pass only releases.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.conf import settings
from django.utils import timezone

from fleet.clients import api_client_of
from fleet.models import HostCluster
from fleet.selectors import quarantined_gpu_indexes
from gpucloud.locks import exclusive
from health import selectors
from health.node_driver import NodeHealthDriver
from health.services import observe, quarantines

log = logging.getLogger(__name__)


@dataclass
class HealthPass:
    """What one pass did."""

    host_cluster: str
    nodes: int = 0
    released: int = 0
    writes: int = 0
    evictions: int = 0


def health_pass(host_cluster: HostCluster) -> HealthPass:
    """One pass over a host cluster; one at a time per host cluster (a lock), safe to run twice."""
    outcome = HealthPass(host_cluster.name)
    with exclusive(f"health:{host_cluster.pk}"):
        now = timezone.now()
        if host_cluster.driver != HostCluster.Driver.KUBERNETES:
            outcome.released = quarantines.release_clean(host_cluster, now)
            return outcome
        driver = NodeHealthDriver(api_client_of(host_cluster))
        try:
            nodes = driver.list_nodes()
            reports = [observe.NodeReport(n.name, n.ready, n.conditions) for n in nodes]
            observe.observe_nodes(host_cluster, now, reports)
            outcome.released = quarantines.release_clean(host_cluster, now)
            result = driver.apply(
                nodes,
                selectors.quarantined_nodes(host_cluster),
                quarantined_gpu_indexes(host_cluster),
                drain=settings.HEALTH_DRAIN,
            )
        finally:
            driver.close()
    outcome.nodes, outcome.writes, outcome.evictions = len(nodes), result.writes, result.evictions
    if result.blocked:
        log.warning("drain held back by disruption budgets", extra={"pods": result.blocked[:20]})
    return outcome
