"""The simulated fleet's workload clock: how far each simulated host cluster's workload has been generated.

The table keeps its name from the clusters app (`workers_simulatedclock`): the simulator took it over in
Django's state only (migrations simulator 0001 and workers 0007), so no data moved.
"""

from __future__ import annotations

from django.db import models

from fleet.models import HostCluster


class SimulatedClock(models.Model):
    """How far the simulated workload of a host cluster has been generated (simulated time, exclusive)."""

    host_cluster = models.OneToOneField(HostCluster, on_delete=models.CASCADE, related_name="+")
    until = models.DateTimeField()

    class Meta:
        db_table = "workers_simulatedclock"

    def __str__(self) -> str:
        return f"{self.host_cluster_id} until {self.until.isoformat()}"
