"""Inference endpoints in the API. Types and lengths are checked here; every rule about what an endpoint may
say (names, sources, engine arguments, replicas, prices, quota) is the service's (`inference.services`)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from fleet.models import GpuClass
from gpucloud.api.serializers import ModelSerializer
from inference.models import InferenceEndpoint, InferenceKey


class EndpointStatusSerializer(serializers.Serializer[InferenceEndpoint]):
    """What the reconciler last observed of the endpoint on the host cluster."""

    replicas_ready = serializers.IntegerField(read_only=True, help_text="replicas serving now")
    model_loaded = serializers.BooleanField(
        read_only=True, help_text="at least one replica has loaded the model"
    )
    message = serializers.CharField(source="status_message", read_only=True, help_text="why it is not ready")
    observed_at = serializers.DateTimeField(read_only=True, allow_null=True)


class InferenceEndpointSerializer(ModelSerializer[InferenceEndpoint]):
    id = serializers.CharField(source="public_id", read_only=True)
    tenant = serializers.CharField(source="tenant.slug", read_only=True)
    gpu_class = serializers.CharField(
        source="gpu_class.name",
        max_length=GpuClass._meta.get_field("name").max_length,
        help_text="GET /api/v1/gpu-classes/ lists them; the tenant needs a quota of it",
    )
    engine_args = serializers.JSONField(
        required=False, help_text='extra vLLM arguments, a list of strings, e.g. ["--dtype=bfloat16"]'
    )
    status = EndpointStatusSerializer(source="*", read_only=True)

    class Meta:
        model = InferenceEndpoint
        fields = [
            "id",
            "tenant",
            "name",
            "model_name",
            "source_uri",
            "served_model_name",
            "revision",
            "engine",
            "engine_args",
            "gpu_class",
            "gpus_per_replica",
            "min_replicas",
            "max_replicas",
            "context_length",
            "visibility",
            "price_per_million_tokens",
            "desired",
            "status",
            "created_at",
            "updated_at",
        ]
        read_only_fields = ["created_at", "updated_at"]
        extra_kwargs = {
            # The rules of these are the service's, with messages naming what is allowed.
            "name": {"validators": []},
            "served_model_name": {"required": False, "allow_blank": True},
        }

    def values(self) -> dict[str, Any]:
        """The validated body as service arguments: `gpu_class` by name."""
        data = dict(self.validated_data)
        if "gpu_class" in data:
            data["gpu_class"] = data["gpu_class"]["name"]
        return data


class InferenceEndpointUpdateSerializer(InferenceEndpointSerializer):
    """The body of PUT and PATCH: the name stays."""

    class Meta(InferenceEndpointSerializer.Meta):
        read_only_fields = ["name", "created_at", "updated_at"]


class InferenceKeySerializer(ModelSerializer[InferenceKey]):
    """A virtual key as listed: never its secret."""

    id = serializers.CharField(source="public_id", read_only=True)
    tenant = serializers.CharField(source="tenant.slug", read_only=True)
    endpoints = serializers.SerializerMethodField(help_text="the endpoints it may call; empty = all of them")

    class Meta:
        model = InferenceKey
        fields = [
            "id",
            "tenant",
            "name",
            "prefix",
            "endpoints",
            "rpm",
            "tpm",
            "monthly_tokens",
            "monthly_budget",
            "expires_at",
            "revoked_at",
            "created_at",
            "last_used_at",
        ]
        read_only_fields = fields

    def get_endpoints(self, key: InferenceKey) -> list[str]:
        return sorted(e.name for e in key.endpoints.all())


class InferenceKeyCreateSerializer(serializers.Serializer[None]):
    name = serializers.CharField(max_length=100, help_text="where the key is used")
    endpoints = serializers.ListField(
        child=serializers.CharField(max_length=40),
        required=False,
        default=list,
        help_text="names of the tenant's endpoints it may call; empty = all (and published ones)",
    )
    rpm = serializers.IntegerField(required=False, allow_null=True, default=None, help_text="requests/minute")
    tpm = serializers.IntegerField(required=False, allow_null=True, default=None, help_text="tokens/minute")
    monthly_tokens = serializers.IntegerField(required=False, allow_null=True, default=None)
    monthly_budget = serializers.DecimalField(
        max_digits=12, decimal_places=6, required=False, allow_null=True, default=None
    )
    expires_at = serializers.DateTimeField(required=False, allow_null=True, default=None)


class InferenceKeyCreatedSerializer(InferenceKeySerializer):
    """The answer to creating a key: the only time its text is shown."""

    key = serializers.SerializerMethodField()

    class Meta(InferenceKeySerializer.Meta):
        fields = [*InferenceKeySerializer.Meta.fields, "key"]
        read_only_fields = fields

    def get_key(self, row: InferenceKey) -> str:
        return str(self.context["key"])
