"""Host clusters (read by everyone signed in, registered by platform administrators) and kubeconfigs."""

from __future__ import annotations

from django.db.models import Count, QuerySet
from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import mixins, status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from scheduling.models import HostCluster
from tenants.api.viewsets import BaseViewSet
from workers.api.serializers import (
    ConformanceSerializer,
    HostClusterRegistrationSerializer,
    HostClusterSerializer,
)
from workers.hostclusters import register_host_cluster
from workers.kubeconfigs import admin_kubeconfig, tenant_kubeconfig


class HostClusterViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, BaseViewSet):
    """Host clusters: the Kubernetes clusters (or the simulated fleet) tenants run on."""

    serializer_class = HostClusterSerializer
    lookup_field = "name"

    def get_queryset(self) -> QuerySet[HostCluster]:
        return HostCluster.objects.annotate(
            node_count=Count("nodes", distinct=True), gpu_count=Count("nodes__gpus", distinct=True)
        ).order_by("name")

    @extend_schema(request=HostClusterRegistrationSerializer, responses={201: HostClusterSerializer})
    def create(self, request: Request) -> Response:
        """Register a Kubernetes host cluster: it is reached, its add-ons and GPU nodes are read first."""
        serializer = HostClusterRegistrationSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = dict(serializer.validated_data)
        data.pop("driver")
        data["topology_levels"] = tuple(data["topology_levels"])
        host_cluster = register_host_cluster(actor=self.actor(), **data)
        return Response(HostClusterSerializer(self.get_queryset().get(pk=host_cluster.pk)).data, status=201)

    @extend_schema(responses={200: ConformanceSerializer})
    @action(detail=True, methods=["get"])
    def conformance(self, request: Request, name: str) -> Response:
        """What the host cluster has and lacks of the capabilities gpucloud uses (re-checked every pass).

        A simulated host cluster lists none: it needs no add-ons.
        """
        return Response(ConformanceSerializer(self.get_object()).data)


class KubeconfigView(BaseViewSet):
    """The caller's own kubeconfig of the tenant cluster: kubelogin with single sign-on, else a short-lived
    token of their own ServiceAccount. Owners, admins, members and viewers; every download is audited."""

    @extend_schema(
        responses={
            (200, "application/yaml"): OpenApiResponse(OpenApiTypes.STR, description="a kubeconfig file")
        },
        operation_id="tenants_kubeconfig_retrieve",
    )
    def retrieve(self, request: Request, tenant_slug: str) -> HttpResponse:
        tenant = get_object_or_404(
            self.visible_tenants().select_related("cluster__host_cluster"), slug=tenant_slug
        )
        text = tenant_kubeconfig(actor=self.actor(), tenant=tenant)
        response = HttpResponse(text, content_type="application/yaml", status=status.HTTP_200_OK)
        response["Content-Disposition"] = f'attachment; filename="{tenant.slug}-kubeconfig.yaml"'
        return response


class AdminKubeconfigView(BaseViewSet):
    """Break-glass: the vCluster's own admin kubeconfig, owners only; audited as `kubeconfig.break_glass`."""

    @extend_schema(
        responses={
            (200, "application/yaml"): OpenApiResponse(OpenApiTypes.STR, description="a kubeconfig file")
        },
        operation_id="tenants_kubeconfig_admin_retrieve",
    )
    def retrieve(self, request: Request, tenant_slug: str) -> HttpResponse:
        tenant = get_object_or_404(
            self.visible_tenants().select_related("cluster__host_cluster"), slug=tenant_slug
        )
        text = admin_kubeconfig(actor=self.actor(), tenant=tenant)
        response = HttpResponse(text, content_type="application/yaml", status=status.HTTP_200_OK)
        response["Content-Disposition"] = f'attachment; filename="{tenant.slug}-admin-kubeconfig.yaml"'
        return response
