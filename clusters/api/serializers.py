from __future__ import annotations

from typing import Any

from rest_framework import serializers

from fleet.models import HostCluster
from gpucloud.api.serializers import ModelSerializer, model_field


class HostClusterSerializer(ModelSerializer[HostCluster]):
    id = serializers.CharField(source="public_id", read_only=True)
    nodes = serializers.IntegerField(
        source="node_count", read_only=True, help_text="nodes present (not gone)"
    )
    gpus = serializers.IntegerField(source="gpu_count", read_only=True, help_text="GPUs of the nodes present")
    tenants = serializers.IntegerField(source="tenant_count", read_only=True, help_text="tenants not deleted")
    cordoned = serializers.BooleanField(read_only=True, help_text="no new tenant is placed here")
    state = serializers.ChoiceField(
        choices=HostCluster.State.choices,
        read_only=True,
        help_text="ready, unreachable or error (its last pass), or retired: out of service, kept for history",
    )

    class Meta:
        model = HostCluster
        fields = [
            "id",
            "name",
            "region",
            "driver",
            "scheduler",
            "state",
            "status_message",
            "endpoint_base",
            "vcluster_mode",
            "server_version",
            "addons",
            "tenants_namespace",
            "topology_levels",
            "cordoned",
            "cordoned_at",
            "cordon_reason",
            "nodes",
            "gpus",
            "tenants",
        ]


ENDPOINT_BASE_LENGTH = HostCluster._meta.get_field("endpoint_base").max_length


class HostClusterRegistrationSerializer(serializers.Serializer[None]):
    """Registering a Kubernetes host cluster. The kubeconfig is stored encrypted and never returned."""

    name = serializers.CharField(max_length=63, trim_whitespace=False)
    driver = serializers.ChoiceField(choices=["kubernetes"], default="kubernetes")
    kubeconfig = serializers.CharField(
        write_only=True, trim_whitespace=False, help_text="the kubeconfig file's text"
    )
    scheduler = serializers.ChoiceField(choices=HostCluster.Scheduler.choices)
    region = model_field(HostCluster, "region", default="")
    endpoint_base = serializers.URLField(allow_blank=True, default="", max_length=ENDPOINT_BASE_LENGTH)
    vcluster_mode = serializers.ChoiceField(choices=["helmrelease", "platform"], default="helmrelease")
    topology_levels = serializers.ListField(child=serializers.CharField(), required=False, default=list)
    watch_tenants = serializers.CharField(
        max_length=63,
        allow_blank=True,
        default="",
        help_text="a namespace: apply the Tenant and RateCard custom resources declared there",
    )


class HostClusterUpdateSerializer(serializers.Serializer[None]):
    """Changing a host cluster: what is left out is kept. A new kubeconfig is checked against the cluster
    before it replaces the stored one, and is never returned."""

    kubeconfig = serializers.CharField(
        write_only=True, required=False, trim_whitespace=False, help_text="a new kubeconfig (rotation)"
    )
    scheduler = serializers.ChoiceField(choices=HostCluster.Scheduler.choices, required=False)
    watch_tenants = serializers.CharField(
        max_length=63,
        allow_blank=True,
        required=False,
        help_text="a namespace whose Tenant and RateCard custom resources gpucloud applies; empty: none",
    )
    region = model_field(HostCluster, "region", required=False)
    endpoint_base = serializers.URLField(allow_blank=True, required=False, max_length=ENDPOINT_BASE_LENGTH)
    topology_levels = serializers.ListField(child=serializers.CharField(), required=False)


class CordonSerializer(serializers.Serializer[None]):
    reason = serializers.CharField(
        required=False, default="", allow_blank=True, max_length=300, help_text="why it takes no new tenants"
    )


class RetireSerializer(serializers.Serializer[None]):
    reason = serializers.CharField(
        required=False,
        default="",
        allow_blank=True,
        max_length=300,
        help_text="why it is retired (its cordon reason); empty: the cordon reason it has is kept",
    )


class DrainSerializer(serializers.Serializer[None]):
    target = serializers.CharField(
        required=False,
        default="",
        allow_blank=True,
        help_text="a host cluster to move to; empty: any that admits",
    )
    recreate = serializers.BooleanField(
        required=False,
        default=False,
        help_text="also move tenants whose tenant cluster is ready or suspended: it is re-provisioned empty",
    )
    dry_run = serializers.BooleanField(required=False, default=False, help_text="report only, change nothing")


class DrainReportSerializer(serializers.Serializer[dict[str, Any]]):
    host_cluster = serializers.CharField()
    moved = serializers.DictField(child=serializers.CharField(), help_text="tenant slug → host cluster")
    refused = serializers.DictField(child=serializers.CharField(), help_text="tenant slug → why it stays")
    dry_run = serializers.BooleanField()


class CapabilitySerializer(serializers.Serializer[dict[str, Any]]):
    name = serializers.CharField()
    found = serializers.BooleanField()
    version = serializers.CharField(
        help_text="what was seen: API versions, configuration; empty when missing"
    )
    without = serializers.CharField(help_text="what gpucloud does without it")
    how = serializers.CharField(help_text="how to add it")


class ConformanceSerializer(serializers.Serializer[HostCluster]):
    """What a host cluster has of what gpucloud uses, re-checked on every reconcile pass."""

    host_cluster = serializers.CharField(source="name")
    driver = serializers.CharField()
    checked_at = serializers.DateTimeField(allow_null=True)
    capabilities = CapabilitySerializer(many=True, source="conformance")
    missing = serializers.SerializerMethodField()
    partitions = serializers.JSONField(
        help_text="the last partition pass: nodes waiting (and why), failed, busy; demand no layout holds"
    )

    def get_missing(self, host_cluster: HostCluster) -> list[str]:
        return [c["name"] for c in host_cluster.conformance if not c["found"]]


class _EventSerializer(serializers.Serializer[dict[str, Any]]):
    id = serializers.CharField()
    signal = serializers.CharField()
    value = serializers.CharField()
    severity = serializers.CharField()
    message = serializers.CharField()
    first_seen = serializers.DateTimeField()
    last_seen = serializers.DateTimeField()


class _QuarantineSerializer(serializers.Serializer[dict[str, Any]]):
    reason = serializers.CharField()
    since = serializers.DateTimeField()
    event = serializers.CharField(allow_null=True)


class _FleetGpuSerializer(serializers.Serializer[dict[str, Any]]):
    index = serializers.IntegerField()
    uuid = serializers.CharField()
    model = serializers.CharField()
    mig_layout = serializers.ListField(child=serializers.CharField(), help_text="MIG profiles in use")
    state = serializers.CharField(
        help_text="free, allocated, mig, shared, quarantined, or gone with its node"
    )
    tenants = serializers.ListField(child=serializers.CharField())
    health = serializers.CharField()
    quarantine = _QuarantineSerializer(allow_null=True)
    open_events = _EventSerializer(many=True)


class FleetNodeSerializer(serializers.Serializer[dict[str, Any]]):
    """A node of a host cluster as health sees it (docs/health.md)."""

    name = serializers.CharField()
    state = serializers.CharField(
        help_text="ready, cordoned, quarantined, or gone (left the cluster; kept as history)"
    )
    zone = serializers.CharField()
    rack = serializers.CharField()
    quarantine = _QuarantineSerializer(allow_null=True)
    open_events = _EventSerializer(many=True)
    gpus = _FleetGpuSerializer(many=True)


class ReleaseSerializer(serializers.Serializer[None]):
    gpu = serializers.IntegerField(
        required=False, allow_null=True, min_value=0, help_text="the GPU's index; none: the whole node"
    )
    reason = serializers.CharField(required=False, default="", allow_blank=True, max_length=300)


class QueueEntrySerializer(serializers.Serializer[Any]):
    """One pending workload of a tenant, where it stands (`clusters.queue`)."""

    name = serializers.CharField()
    queue = serializers.CharField(help_text="the tenant's LocalQueue (Kueue) or queue (KAI)")
    position = serializers.IntegerField(help_text="1 is next in the tenant's queue")
    reported_by = serializers.CharField(
        source="source", help_text="kueue (a Workload), kai (a PodGroup) or simulated (the simulator)"
    )
    gpu_class = serializers.CharField()
    pods = serializers.IntegerField(help_text="pods of the workload (a gang if more than one)")
    gpus = serializers.IntegerField(help_text="units asked for, all pods together")
    priority = serializers.IntegerField(help_text="the scheduler's priority; higher goes first")
    created_at = serializers.DateTimeField(allow_null=True)
    reason = serializers.CharField(help_text="why it waits, in plain words")
    scheduler_message = serializers.CharField(help_text="why it waits, in the scheduler's own words")
    estimated_start = serializers.DateTimeField(
        allow_null=True, help_text="null: not within a week (see reason); docs/placement.md, Queue estimates"
    )
