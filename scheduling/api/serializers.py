from __future__ import annotations

from rest_framework import serializers

from scheduling.models import GpuClass


class GpuClassSerializer(serializers.ModelSerializer):
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


class CapacitySerializer(serializers.Serializer):
    gpu_class = serializers.CharField()
    gpu_model = serializers.CharField()
    kind = serializers.CharField()
    capacity = serializers.IntegerField()
    guaranteed = serializers.IntegerField()
    available = serializers.IntegerField()
    healthy_gpus = serializers.IntegerField()
