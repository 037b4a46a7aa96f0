"""State of the simulated host clusters: what a real cluster would hold in etcd."""

from __future__ import annotations

from django.db import models

from fleet.models import HostCluster
from tenants.models import Tenant


class SimulatedTenantCluster(models.Model):
    """A tenant cluster as the simulated driver created it on a simulated host cluster."""

    host_cluster = models.ForeignKey(HostCluster, on_delete=models.CASCADE, related_name="+")
    slug = models.CharField(max_length=40)
    namespace = models.CharField(max_length=63)
    endpoint = models.CharField(max_length=300)
    quotas = models.JSONField(default=list)
    suspended = models.BooleanField(default=False)
    created_at = models.DateTimeField()
    ready_at = models.DateTimeField()
    deleting_since = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["host_cluster", "slug"], name="simulated_tenant_unique_slug")
        ]

    def __str__(self) -> str:
        return f"{self.slug}@{self.host_cluster_id}"


class PassRequest(models.Model):
    """A pass over a host cluster that was asked for and has not started yet (clusters/reconcile/coalesce.py).

    Changes made while one is pending ride on it, so a burst of changes costs one pass per host cluster.
    """

    host_cluster = models.OneToOneField(
        HostCluster, on_delete=models.CASCADE, primary_key=True, related_name="+"
    )
    requested_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.host_cluster_id} requested {self.requested_at}"


class TenantChange(models.Model):
    """A tenant changed and the next pass over its host cluster must look at it
    (clusters/reconcile/coalesce.py).

    One row per tenant however often it changed: the pass takes the rows of its host cluster, so it costs what
    changed, not every tenant of the host cluster (the periodic pass looks at them all).
    """

    tenant = models.OneToOneField(Tenant, on_delete=models.CASCADE, primary_key=True, related_name="+")
    host_cluster = models.ForeignKey(HostCluster, on_delete=models.CASCADE, related_name="+")

    def __str__(self) -> str:
        return f"tenant {self.tenant_id} on {self.host_cluster_id}"


class ObservedWorkload(models.Model):
    """A Kueue `Workload` the reconciler saw in a tenant's namespace on a Kubernetes host cluster.

    Replaced per pass (`clusters.reconcile.tenants`), and only when what was seen differs from what is stored.
    """

    class State(models.TextChoices):
        ADMITTED = "admitted"
        PENDING = "pending"
        FINISHED = "finished"

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="observed_workloads")
    name = models.CharField(max_length=253)
    queue = models.CharField(max_length=253, blank=True)
    state = models.CharField(max_length=16, choices=State.choices)
    gpus = models.PositiveIntegerField(help_text="GPU units asked for: pods × GPUs (or MIG slices) per pod")
    gpu_class = models.CharField(max_length=100, blank=True)
    created_at = models.DateTimeField(null=True, blank=True, help_text="when Kueue created it")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["tenant", "name"], name="observed_workload_unique_name")
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.state})"
