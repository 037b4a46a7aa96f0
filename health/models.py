"""GPU and node health: the events DCGM rounds and node conditions raise, and the quarantines they lead to.

The tables keep the names they had in the fleet app (`scheduling_healthevent`, `scheduling_quarantine`):
health took them over in Django's state only (migrations health 0001 and scheduling 0008), so no data moved.
"""

from __future__ import annotations

from django.db import models

from fleet.models import Gpu, HostCluster, Node
from gpucloud.ids import PublicIdField


class HealthEvent(models.Model):
    """One health signal on a GPU or a node (`docs/health.md`), deduplicated: while it keeps being seen (or
    comes back within `HEALTH_EVENT_CLEAR_AFTER`) it is the same event, its `last_seen` and `value` moved on.
    Written by `health.services` only."""

    class Severity(models.TextChoices):
        INFO = "info"
        WARNING = "warning"
        FATAL = "fatal"

    class Source(models.TextChoices):
        DCGM = "dcgm"
        KUBERNETES = "kubernetes"
        NVSENTINEL = "nvsentinel"

    public_id = PublicIdField(prefix="he")
    host_cluster = models.ForeignKey(HostCluster, on_delete=models.CASCADE, related_name="+")
    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="health_events")
    gpu = models.ForeignKey(
        Gpu, null=True, blank=True, on_delete=models.CASCADE, related_name="health_events"
    )
    subject = models.CharField(max_length=20, help_text="`node`, or `gpu:<index>` for a GPU")
    signal = models.CharField(max_length=80, help_text="xid, ecc_dbe, gpu_missing, node_not_ready, …")
    value = models.CharField(max_length=200, blank=True)
    severity = models.CharField(max_length=10, choices=Severity.choices)
    action = models.CharField(max_length=20, help_text="what the rule did: none, quarantine")
    recommended = models.CharField(max_length=40, blank=True, help_text="reset GPU, reboot node, …")
    message = models.CharField(max_length=500, blank=True)
    source = models.CharField(max_length=12, choices=Source.choices)
    first_seen = models.DateTimeField()
    last_seen = models.DateTimeField()
    closed_at = models.DateTimeField(null=True, blank=True, db_index=True)
    occurrences = models.PositiveIntegerField(default=1, help_text="times it came back before it closed")

    class Meta:
        db_table = "scheduling_healthevent"
        ordering = ["-first_seen", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["node", "subject", "signal"],
                condition=models.Q(closed_at__isnull=True),
                name="health_event_one_open_per_signal",
            )
        ]

    def __str__(self) -> str:
        return f"{self.node_id}/{self.subject} {self.signal}={self.value}"


class Quarantine(models.Model):
    """A GPU (`gpu` set) or a whole node taken out of service, why, and how it came back. The fleet's flags
    (`Gpu.health`, `Node.state`) say what is out now; these rows are the history the back-off counts."""

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="quarantines")
    gpu = models.ForeignKey(Gpu, null=True, blank=True, on_delete=models.CASCADE, related_name="quarantines")
    event = models.ForeignKey(HealthEvent, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    reason = models.CharField(max_length=63, help_text="short, a taint value: xid-79, gpu-missing, …")
    started_at = models.DateTimeField()
    released_at = models.DateTimeField(null=True, blank=True)
    released_by = models.CharField(max_length=150, blank=True)
    release_reason = models.CharField(max_length=300, blank=True)

    class Meta:
        db_table = "scheduling_quarantine"
        ordering = ["-started_at", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["node", "gpu"],
                condition=models.Q(released_at__isnull=True),
                name="quarantine_one_open_per_target",
                nulls_distinct=False,
            )
        ]

    def __str__(self) -> str:
        return f"{self.node_id}/{self.gpu_id or 'node'} {self.reason}"
