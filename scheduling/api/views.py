"""The GPU catalog, host clusters and fleet capacity (read-only for everyone signed in)."""

from __future__ import annotations

from dataclasses import asdict

from django.db.models import QuerySet
from rest_framework import mixins
from rest_framework.request import Request
from rest_framework.response import Response

from gpucloud.api.viewsets import BaseViewSet
from scheduling.api.serializers import CapacitySerializer, GpuClassSerializer
from scheduling.models import GpuClass
from tenants.capacity import capacity_table


class GpuClassViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, BaseViewSet):
    """GPU classes: the units quotas are written in."""

    serializer_class = GpuClassSerializer
    lookup_field = "name"
    lookup_value_regex = r"[a-z0-9.-]+"
    filterset_fields = ["kind", "gpu_model__slug"]

    def get_queryset(self) -> QuerySet[GpuClass]:
        return GpuClass.objects.select_related("gpu_model").order_by("name")


class CapacityViewSet(mixins.ListModelMixin, BaseViewSet):
    """Per GPU class: what the healthy fleet holds, what is guaranteed, what can still be guaranteed."""

    serializer_class = CapacitySerializer
    filter_backends: list[type] = []  # a computed table, not a queryset: list() filters it by hand

    def list(self, request: Request) -> Response:
        rows = [asdict(row) for row in capacity_table()]
        gpu_model = request.query_params.get("gpu_model")
        if gpu_model:
            rows = [row for row in rows if row["gpu_model"] == gpu_model]
        page = self.paginate_queryset(rows)
        return self.get_paginated_response(CapacitySerializer(page, many=True).data)
