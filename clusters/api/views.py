"""Host clusters (read by everyone signed in, registered by platform administrators) and kubeconfigs."""

from __future__ import annotations

from django.db.models import QuerySet
from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import mixins, status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from clusters import lifecycle, queue
from clusters.access.kubeconfigs import admin_kubeconfig, tenant_kubeconfig
from clusters.api.serializers import (
    ConformanceSerializer,
    CordonSerializer,
    DrainReportSerializer,
    DrainSerializer,
    FleetNodeSerializer,
    HostClusterRegistrationSerializer,
    HostClusterSerializer,
    HostClusterUpdateSerializer,
    QueueEntrySerializer,
    ReleaseSerializer,
    RetireSerializer,
)
from clusters.registration import register_host_cluster
from core.permissions import is_platform_admin
from fleet.models import HostCluster, Node, PendingWorkload, host_cluster_named
from fleet.selectors import host_clusters_counted
from gpucloud.errors import PermissionDenied, ValidationFailed
from health import selectors as health_reads
from health.services import quarantines
from tenants.api.viewsets import BaseViewSet


class HostClusterViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, BaseViewSet):
    """Host clusters: the Kubernetes clusters (or the simulated fleet) tenants run on."""

    serializer_class = HostClusterSerializer
    lookup_field = "name"

    @property
    def dry_run_allowed(self) -> bool:  # type: ignore[override]
        """Retiring writes database rows only, so it is offered with `?dry_run=true` (Terraform's plan asks
        so); registering and changing ask the cluster, and are not."""
        return getattr(self, "action", None) == "retire"

    def get_queryset(self) -> QuerySet[HostCluster]:
        return host_clusters_counted()

    def _answer(self, host_cluster: HostCluster, status: int = 200) -> Response:
        return Response(
            HostClusterSerializer(self.get_queryset().get(pk=host_cluster.pk)).data, status=status
        )

    def _target(self) -> HostCluster:
        return get_object_or_404(HostCluster, name=self.kwargs["name"])

    @extend_schema(request=HostClusterRegistrationSerializer, responses={201: HostClusterSerializer})
    def create(self, request: Request) -> Response:
        """Register a Kubernetes host cluster: it is reached, its add-ons and GPU nodes are read first."""
        serializer = HostClusterRegistrationSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = dict(serializer.validated_data)
        data.pop("driver")
        data["topology_levels"] = tuple(data["topology_levels"])
        host_cluster = register_host_cluster(actor=self.actor(), **data)
        return self._answer(host_cluster, 201)

    @extend_schema(request=HostClusterUpdateSerializer, responses={200: HostClusterSerializer})
    def partial_update(self, request: Request, name: str) -> Response:
        """Change a host cluster: rotate its kubeconfig (checked against the cluster first), change its
        scheduler (only with no tenants on it), the namespace it watches, region, endpoint base or topology
        levels. Platform administrators only; audited."""
        _admin_only(request, "host clusters are changed by platform administrators only")
        serializer = HostClusterUpdateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        host_cluster = lifecycle.update_host_cluster(
            actor=self.actor(), host_cluster=self._target(), **serializer.validated_data
        )
        return self._answer(host_cluster)

    @extend_schema(responses={204: None})
    def destroy(self, request: Request, name: str) -> Response:
        """Delete an empty host cluster: 409 naming the tenants still on it (drain it first) or the history
        that keeps it. Platform administrators only; audited."""
        _admin_only(request, "host clusters are deleted by platform administrators only")
        lifecycle.delete_host_cluster(actor=self.actor(), host_cluster=self._target())
        return Response(status=204)

    @extend_schema(request=CordonSerializer, responses={200: HostClusterSerializer})
    @action(detail=True, methods=["post"], filter_backends=[])
    def cordon(self, request: Request, name: str) -> Response:
        """Place no new tenant on this host cluster; its tenants keep running. Audited."""
        _admin_only(request, "host clusters are cordoned by platform administrators only")
        serializer = CordonSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        host_cluster = lifecycle.cordon_host_cluster(
            actor=self.actor(), host_cluster=self._target(), reason=serializer.validated_data["reason"]
        )
        return self._answer(host_cluster)

    @extend_schema(request=None, responses={200: HostClusterSerializer})
    @action(detail=True, methods=["post"], filter_backends=[])
    def uncordon(self, request: Request, name: str) -> Response:
        """New tenants may be placed on this host cluster again. Audited."""
        _admin_only(request, "host clusters are uncordoned by platform administrators only")
        return self._answer(lifecycle.uncordon_host_cluster(actor=self.actor(), host_cluster=self._target()))

    @extend_schema(request=DrainSerializer, responses={200: DrainReportSerializer})
    @action(detail=True, methods=["post"], filter_backends=[])
    def drain(self, request: Request, name: str) -> Response:
        """Cordon the host cluster and move its tenants to host clusters that admit their guarantees; the
        answer names each tenant moved, and each refused with the reason (docs/kubernetes.md, "Host clusters
        over time"). `dry_run` reports without changing anything. Audited."""
        _admin_only(request, "host clusters are drained by platform administrators only")
        serializer = DrainSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        report = lifecycle.drain_host_cluster(
            actor=self.actor(),
            host_cluster=self._target(),
            target=host_cluster_named(data["target"], "target"),
            recreate=data["recreate"],
            dry_run=data["dry_run"],
        )
        return Response(DrainReportSerializer(report.as_dict()).data)

    @extend_schema(request=RetireSerializer, responses={200: HostClusterSerializer})
    @action(detail=True, methods=["post"], filter_backends=[])
    def retire(self, request: Request, name: str) -> Response:
        """Take an empty host cluster out of service for good and keep its history: state `retired`,
        cordoned, no passes, no capacity, no tenants. 409 naming the tenants still on it (drain it first) or
        the pods not seen to end. `?dry_run=true` answers the same and keeps nothing. Audited."""
        _admin_only(request, "host clusters are retired by platform administrators only")
        serializer = RetireSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        host_cluster = lifecycle.retire_host_cluster(
            actor=self.actor(), host_cluster=self._target(), reason=serializer.validated_data["reason"]
        )
        return self._answer(host_cluster)

    @extend_schema(request=None, responses={200: HostClusterSerializer})
    @action(detail=True, methods=["post"], filter_backends=[])
    def unretire(self, request: Request, name: str) -> Response:
        """Put a retired host cluster back in service, still cordoned (uncordon it to take tenants).
        Audited."""
        _admin_only(request, "host clusters are un-retired by platform administrators only")
        return self._answer(lifecycle.unretire_host_cluster(actor=self.actor(), host_cluster=self._target()))

    @extend_schema(responses={200: ConformanceSerializer})
    @action(detail=True, methods=["get"])
    def conformance(self, request: Request, name: str) -> Response:
        """What the host cluster has and lacks of the capabilities gpucloud uses (re-checked every pass).

        A simulated host cluster lists none: it needs no add-ons.
        """
        return Response(ConformanceSerializer(self.get_object()).data)

    @extend_schema(responses=FleetNodeSerializer(many=True), filters=False)
    @action(detail=True, methods=["get"], filter_backends=[])
    def nodes(self, request: Request, name: str) -> Response:
        """Each node with its GPUs: index, UUID, model, MIG layout, what holds it, health, why it is out and
        the open health events. Platform administrators only."""
        _admin_only(request, "the fleet's nodes and GPUs are shown to platform administrators only")
        host_cluster = get_object_or_404(HostCluster, name=name)
        rows = health_reads.nodes_view(host_cluster)
        page = self.paginate_queryset(rows)
        # DRF's stubs type a serializer's instance as one object, even with many=True
        return self.get_paginated_response(FleetNodeSerializer(page, many=True).data)  # type: ignore[arg-type]

    @extend_schema(request=ReleaseSerializer, responses=FleetNodeSerializer)
    @action(detail=True, methods=["post"], url_path=r"nodes/(?P<node>[^/]+)/release", filter_backends=[])
    def release(self, request: Request, name: str, node: str) -> Response:
        """Put a quarantined node, or one GPU of it (`gpu`: its index), back into service. Audited; a fault
        still reported takes it out again at the next round."""
        _admin_only(request, "quarantined hardware is released by platform administrators only")
        host_cluster = get_object_or_404(HostCluster, name=name)
        target = get_object_or_404(Node, host_cluster=host_cluster, name=node)
        serializer = ReleaseSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        index = serializer.validated_data.get("gpu")
        gpu = None
        if index is not None:
            gpu = target.gpus.filter(index=index).first()
            if gpu is None:
                indices = ", ".join(str(i) for i in target.gpus.values_list("index", flat=True))
                raise ValidationFailed.on("gpu", f"node {node} has no GPU {index}; its GPUs: {indices}")
        quarantines.release(
            actor=self.actor(), node=target, gpu=gpu, reason=serializer.validated_data["reason"]
        )
        view = next(n for n in health_reads.nodes_view(host_cluster) if n["name"] == node)
        return Response(FleetNodeSerializer(view).data)


def _admin_only(request: Request, message: str) -> None:
    if not is_platform_admin(request.user):
        raise PermissionDenied(message)


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


# What waits ahead of a feasibility ask (billing's `FeasibilityView.behind`, given by the URL configuration).
waiting_ahead = queue.ahead


class TenantQueueView(BaseViewSet):
    """The tenant's pending workloads in queue order: position, reason in plain words, estimated start
    (`clusters.queue`). Every role of the tenant may read it; another tenant is "not found". Paged like
    every list; the positions are the whole queue's."""

    serializer_class = QueueEntrySerializer
    queryset = PendingWorkload.objects.none()  # the schema reads path parameters from it; never listed

    @extend_schema(operation_id="tenants_queue_list")
    def list(self, request: Request, tenant_slug: str) -> Response:
        tenant = self.tenant_named(tenant_slug, "tenant.view")
        page = self.paginate_queryset(queue.tenant_queue(tenant))
        return self.get_paginated_response(QueueEntrySerializer(page, many=True).data)
