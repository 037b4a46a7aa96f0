from __future__ import annotations

from rest_framework import serializers

from gpucloud.api.serializers import ModelSerializer
from health.models import HealthEvent


class HealthEventSerializer(ModelSerializer[HealthEvent]):
    """A health event on a GPU or a node (docs/health.md)."""

    id = serializers.CharField(source="public_id", read_only=True)
    host_cluster = serializers.CharField(source="host_cluster.name", read_only=True)
    node = serializers.CharField(source="node.name", read_only=True)
    gpu = serializers.CharField(source="gpu.uuid", read_only=True, allow_null=True, default=None)
    gpu_index = serializers.IntegerField(source="gpu.index", read_only=True, allow_null=True, default=None)
    state = serializers.SerializerMethodField()

    class Meta:
        model = HealthEvent
        fields = [
            "id", "host_cluster", "node", "gpu", "gpu_index", "subject", "signal", "value", "severity",
            "action", "recommended", "message", "source", "first_seen", "last_seen", "closed_at",
            "occurrences", "state",
        ]  # fmt: skip

    def get_state(self, event: HealthEvent) -> str:
        return "open" if event.closed_at is None else "closed"
