"""State of the simulated host clusters: what a real cluster would hold in etcd."""

from __future__ import annotations

from django.db import models

from scheduling.models import HostCluster


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


class SimulatedPod(models.Model):
    """A pod the simulated fleet ran: which GPUs (or which MIG instance, or what share) it held, and when.

    The simulator writes these as it places workloads with the placement engine; the simulated dcgm-exporters
    report them as DCGM samples, and metering is checked against them as ground truth.
    """

    host_cluster = models.ForeignKey(HostCluster, on_delete=models.CASCADE, related_name="+")
    tenant = models.ForeignKey(
        "tenants.Tenant", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    namespace = models.CharField(max_length=63)
    name = models.CharField(max_length=253)
    gpu_class = models.ForeignKey("scheduling.GpuClass", on_delete=models.PROTECT, related_name="+")
    node = models.ForeignKey("scheduling.Node", on_delete=models.CASCADE, related_name="+")
    gpu_uuids = models.JSONField(
        default=list, help_text="physical GPUs held (the parent GPU for a MIG slice)"
    )
    gpu_instance_id = models.PositiveSmallIntegerField(null=True, blank=True, help_text="MIG GPU_I_ID")
    gpu_milli = models.PositiveIntegerField(default=1000, help_text="share of each GPU held, of 1000")
    started_at = models.DateTimeField(db_index=True)
    finished_at = models.DateTimeField(null=True, blank=True, db_index=True)
    # Simulator bookkeeping (workers/simulator.py); metering needs none of it.
    ends_at = models.DateTimeField(
        null=True, blank=True, help_text="when the simulator will end it; finished_at is set then"
    )
    mig_layout = models.JSONField(
        default=list, blank=True, help_text="MIG layout of its GPU; gpu_instance_id indexes it"
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["host_cluster", "namespace", "name"], name="simulated_pod_unique_name"
            )
        ]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


class SimulatedClock(models.Model):
    """How far the simulated workload of a host cluster has been generated (simulated time, exclusive)."""

    host_cluster = models.OneToOneField(HostCluster, on_delete=models.CASCADE, related_name="+")
    until = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.host_cluster_id} until {self.until.isoformat()}"
