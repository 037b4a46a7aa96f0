"""Inference endpoints of a tenant, at /api/v1/tenants/{slug}/inference-endpoints/. Views only translate
HTTP to `inference.services` and back."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status
from rest_framework.request import Request
from rest_framework.response import Response

from inference import keys, services
from inference.api.serializers import (
    InferenceEndpointSerializer,
    InferenceEndpointUpdateSerializer,
    InferenceKeyCreatedSerializer,
    InferenceKeyCreateSerializer,
    InferenceKeySerializer,
)
from inference.models import InferenceEndpoint, InferenceKey
from tenants.api.views import TenantChildViewSet, gpu_class_named


class InferenceEndpointViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, TenantChildViewSet):
    """A tenant's inference endpoints: models served by vLLM replicas on its GPU quota (docs/inference.md).

    Reading needs `inference.view`; creating, changing and deleting `inference.manage`, and publishing to
    other tenants `inference.publish` (the services check both role and token scope).
    """

    serializer_class = InferenceEndpointSerializer
    read_permission = "inference.view"
    lookup_field = "public_id"
    lookup_url_kwarg = "id"
    lookup_value_regex = r"ie_[a-z0-9]+"

    def get_queryset(self) -> QuerySet[InferenceEndpoint]:
        if getattr(self, "swagger_fake_view", False):  # drf-spectacular: no tenant in the URL
            return InferenceEndpoint.objects.none()
        rows = InferenceEndpoint.objects.filter(tenant=self.tenant())
        return rows.select_related("tenant", "gpu_class").order_by("name")

    @staticmethod
    def _arguments(values: dict[str, Any]) -> dict[str, Any]:
        if "gpu_class" in values:
            values["gpu_class"] = gpu_class_named(values["gpu_class"])
        return values

    @extend_schema(responses={201: InferenceEndpointSerializer})
    def create(self, request: Request, tenant_slug: str) -> Response:
        """Create an endpoint; its replicas must fit the tenant's quota of the GPU class."""
        serializer = InferenceEndpointSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        endpoint = services.create_endpoint(
            actor=self.actor(), tenant=self.tenant(), **self._arguments(serializer.values())
        )
        return Response(InferenceEndpointSerializer(endpoint).data, status=status.HTTP_201_CREATED)

    def _update(self, request: Request, *, partial: bool) -> Response:
        endpoint = self.get_object()
        serializer = InferenceEndpointUpdateSerializer(endpoint, data=request.data, partial=partial)
        serializer.is_valid(raise_exception=True)
        endpoint = services.update_endpoint(
            actor=self.actor(), endpoint=endpoint, **self._arguments(serializer.values())
        )
        return Response(InferenceEndpointSerializer(endpoint).data)

    @extend_schema(request=InferenceEndpointUpdateSerializer, responses=InferenceEndpointSerializer)
    def update(self, request: Request, tenant_slug: str, id: str) -> Response:
        """Replace an endpoint's fields (its name stays); admitted against the quota again."""
        return self._update(request, partial=False)

    @extend_schema(request=InferenceEndpointUpdateSerializer, responses=InferenceEndpointSerializer)
    def partial_update(self, request: Request, tenant_slug: str, id: str) -> Response:
        """Change some of an endpoint's fields; admitted against the quota again."""
        return self._update(request, partial=True)

    def destroy(self, request: Request, tenant_slug: str, id: str) -> Response:
        """Delete an endpoint; the reconciler removes its objects from the host cluster."""
        services.delete_endpoint(actor=self.actor(), endpoint=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)


class InferenceKeyViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, TenantChildViewSet):
    """A tenant's virtual keys for the inference gateway (docs/inference.md, "Keys"): listed without
    secrets; POST shows the key once; DELETE revokes (the key stays listed, with `revoked_at`).

    Reading needs `inference.view`; creating and revoking `inference.manage`."""

    serializer_class = InferenceKeySerializer
    read_permission = "inference.view"
    lookup_field = "public_id"
    lookup_url_kwarg = "id"
    lookup_value_regex = r"ik_[a-z0-9]+"
    idempotent_replay = False  # a replay would have to show the secret again

    def get_queryset(self) -> QuerySet[InferenceKey]:
        if getattr(self, "swagger_fake_view", False):
            return InferenceKey.objects.none()
        rows = InferenceKey.objects.filter(tenant=self.tenant()).select_related("tenant")
        return rows.prefetch_related("endpoints").order_by("created_at", "pk")

    @extend_schema(request=InferenceKeyCreateSerializer, responses={201: InferenceKeyCreatedSerializer})
    def create(self, request: Request, tenant_slug: str) -> Response:
        """Make a key; the answer is the only time its text is shown."""
        serializer = InferenceKeyCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        key, text = keys.create_key(actor=self.actor(), tenant=self.tenant(), **serializer.validated_data)
        body = InferenceKeyCreatedSerializer(key, context={"key": text}).data
        return Response(body, status=status.HTTP_201_CREATED)

    @extend_schema(responses={200: InferenceKeySerializer})
    def destroy(self, request: Request, tenant_slug: str, id: str) -> Response:
        """Revoke the key: the gateway refuses it from the next request on."""
        key = keys.revoke_key(actor=self.actor(), key=self.get_object())
        return Response(InferenceKeySerializer(key).data)
