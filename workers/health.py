"""The health pass of a host cluster: node conditions in, the quarantine out onto the cluster.

Level-triggered like the tenant reconciler: every `HEALTH_PASS_INTERVAL` (and right after a quarantine or a
release, as a shortcut into the same function) it lists the GPU nodes of a Kubernetes host cluster once, hands
their conditions to `scheduling.health.observe_nodes`, releases what has been clean long enough, and makes
every node carry the quarantine the database says (`workers.drivers.node_health`). On the simulated fleet the
database is the whole truth, so the pass only releases.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.conf import settings
from django.utils import timezone

from scheduling import health
from scheduling.models import HostCluster
from workers.drivers.node_health import NodeHealthDriver
from workers.hostclusters import api_client_of
from workers.locks import exclusive

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
            outcome.released = health.release_clean(host_cluster, now)
            return outcome
        driver = NodeHealthDriver(api_client_of(host_cluster))
        try:
            nodes = driver.list_nodes()
            reports = [health.NodeReport(n.name, n.ready, n.conditions) for n in nodes]
            health.observe_nodes(host_cluster, now, reports)
            outcome.released = health.release_clean(host_cluster, now)
            result = driver.apply(
                nodes,
                health.quarantined_nodes(host_cluster),
                health.quarantined_gpus(host_cluster),
                drain=settings.HEALTH_DRAIN,
            )
        finally:
            driver.close()
    outcome.nodes, outcome.writes, outcome.evictions = len(nodes), result.writes, result.evictions
    if result.blocked:
        log.warning("drain held back by disruption budgets", extra={"pods": result.blocked[:20]})
    return outcome
