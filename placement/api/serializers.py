from __future__ import annotations

from typing import Any

from rest_framework import serializers

from fleet.models import GpuClass
from gpucloud.api.serializers import ModelSerializer
from tenants.models import Tenant


class GpuClassSerializer(ModelSerializer[GpuClass]):
    gpu_model = serializers.CharField(source="gpu_model.slug")
    gpu_fraction = serializers.SerializerMethodField(help_text="share of one physical GPU, e.g. '1/7'")
    units_per_gpu = serializers.IntegerField(help_text="most units of this class one GPU gives")

    class Meta:
        model = GpuClass
        fields = [
            "name",
            "kind",
            "gpu_model",
            "mig_profile",
            "resource_name",
            "gpu_fraction",
            "units_per_gpu",
        ]

    def get_gpu_fraction(self, gpu_class: GpuClass) -> str:
        return str(gpu_class.gpu_fraction)


class CapacitySerializer(serializers.Serializer[dict[str, Any]]):
    host_cluster = serializers.CharField(help_text="guarantees are admitted per host cluster")
    gpu_class = serializers.CharField()
    gpu_model = serializers.CharField()
    kind = serializers.CharField()
    capacity = serializers.IntegerField()
    guaranteed = serializers.IntegerField()
    available = serializers.IntegerField()
    healthy_gpus = serializers.IntegerField()
    dedicated_gpus = serializers.IntegerField(
        help_text="healthy GPUs of the model on whole nodes held for isolated tenants (dedicated to them, or "
        "needed to cover their guarantees): out of reach of every other guarantee, `available` included"
    )
    advertised = serializers.IntegerField(
        allow_null=True,
        help_text="units the nodes advertise now (MIG slices after the MIG manager's success, time-sliced "
        "replicas), on Kubernetes host clusters whose partitions gpucloud manages; null elsewhere",
    )
    allocated = serializers.IntegerField(help_text="units held by running simulated pods")
    free = serializers.IntegerField(
        help_text="units a new pod of a shared-pool tenant could take now (healthy, not dedicated, not held)"
    )
    largest_free_on_node = serializers.IntegerField(
        help_text="most free units on one node: the biggest single pod that fits now"
    )
    largest_free_in_nvlink_domain = serializers.IntegerField(
        help_text="most free units in one NVLink domain: the biggest gang that fits inside one"
    )
    quarantined_gpus = serializers.IntegerField(help_text="GPUs of the model out of service (docs/health.md)")
    quarantine_reasons = serializers.DictField(
        child=serializers.IntegerField(), help_text="GPUs out, by reason: xid-79, gpu-missing, …"
    )


class QuotaWhatIfSerializer(serializers.Serializer[None]):
    tenant = serializers.CharField(
        required=False, default="", allow_blank=True, help_text="slug of one of your tenants"
    )
    trust_tier = serializers.ChoiceField(
        choices=Tenant.TrustTier.choices,
        required=False,
        help_text="for a new tenant (no `tenant`); default standard",
    )
    gpu_class = serializers.CharField()
    guaranteed = serializers.IntegerField(min_value=0, max_value=100_000)


class TopologySerializer(serializers.Serializer[None]):
    level = serializers.ChoiceField(choices=["zone", "block", "rack", "nvlink", "node"])
    mode = serializers.ChoiceField(
        choices=["required", "preferred"],
        default="preferred",
        help_text="required: every pod inside one domain of the level; preferred: that level if possible, "
        "else wider",
    )


class GangWhatIfSerializer(serializers.Serializer[None]):
    pods = serializers.IntegerField(min_value=1, max_value=1024)
    gpus_per_pod = serializers.IntegerField(min_value=1, max_value=64, default=1)
    gpu_class = serializers.CharField(
        required=False, default="", allow_blank=True, help_text="whole or shared class; any model if empty"
    )
    topology = TopologySerializer(required=False, help_text="default: rack, preferred")
    tenant = serializers.CharField(required=False, default="", allow_blank=True)
    trust_tier = serializers.ChoiceField(choices=Tenant.TrustTier.choices, required=False)


class WhatIfSerializer(serializers.Serializer[None]):
    quotas = QuotaWhatIfSerializer(many=True, required=False)
    gang = GangWhatIfSerializer(required=False)
    host_cluster = serializers.CharField(
        required=False, default="", allow_blank=True, help_text="default: your tenant's, or the first"
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if ("quotas" in attrs) == ("gang" in attrs):
            raise serializers.ValidationError("ask about either quotas or a gang, not both and not neither")
        if "quotas" in attrs and not attrs["quotas"]:
            raise serializers.ValidationError({"quotas": ["give at least one quota"]})
        return attrs


class WhatIfNodeSerializer(serializers.Serializer[dict[str, Any]]):
    node = serializers.CharField()
    units = serializers.IntegerField()


class WhatIfQuotaAnswerSerializer(serializers.Serializer[dict[str, Any]]):
    tenant = serializers.CharField(allow_null=True)
    trust_tier = serializers.CharField()
    gpu_class = serializers.CharField()
    guaranteed = serializers.IntegerField()
    fits = serializers.BooleanField()
    placeable = serializers.IntegerField(help_text="units that would fit now")
    nodes = WhatIfNodeSerializer(many=True)


class WhatIfAnswerSerializer(serializers.Serializer[dict[str, Any]]):
    kind = serializers.ChoiceField(choices=["quotas", "gang"])
    fits = serializers.BooleanField()
    host_cluster = serializers.CharField()
    quotas = WhatIfQuotaAnswerSerializer(many=True, required=False)
    topology = serializers.DictField(child=serializers.CharField(), required=False)
    domain = serializers.DictField(child=serializers.CharField(), required=False, allow_null=True)
    nodes = WhatIfNodeSerializer(many=True, required=False)
