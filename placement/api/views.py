"""The GPU catalog, host clusters and fleet capacity (read-only for everyone signed in)."""

from __future__ import annotations

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins
from rest_framework.request import Request
from rest_framework.response import Response

from fleet.models import GpuClass, host_cluster_named
from placement import what_if
from placement.api.serializers import (
    CapacitySerializer,
    GpuClassSerializer,
    WhatIfAnswerSerializer,
    WhatIfSerializer,
)
from placement.service import capacity_rows
from tenants.api.viewsets import BaseViewSet


class GpuClassViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, BaseViewSet):
    """GPU classes: the units quotas are written in."""

    serializer_class = GpuClassSerializer
    lookup_field = "name"
    lookup_value_regex = r"[a-z0-9.-]+"
    filterset_fields = ["kind", "gpu_model__slug"]

    def get_queryset(self) -> QuerySet[GpuClass]:
        return GpuClass.objects.select_related("gpu_model").order_by("name")


class CapacityViewSet(mixins.ListModelMixin, BaseViewSet):
    """Per host cluster and GPU class: what its healthy GPUs hold, what is guaranteed to its tenants, what can
    still be guaranteed there, and what the placement engine sees now: allocated, free, and the largest free
    block on one node and in one NVLink domain."""

    serializer_class = CapacitySerializer
    filter_backends: list[type] = []  # a computed table, not a queryset: list() filters it by hand

    @extend_schema(
        parameters=[
            OpenApiParameter("gpu_model", str, description="only the classes of this GPU model"),
            OpenApiParameter("host_cluster", str, description="only this host cluster"),
        ]
    )
    def list(self, request: Request) -> Response:
        rows = capacity_rows(host_cluster_named(request.query_params.get("host_cluster")))
        gpu_model = request.query_params.get("gpu_model")
        if gpu_model:
            rows = [row for row in rows if row["gpu_model"] == gpu_model]
        page = self.paginate_queryset(rows)
        # DRF's stubs type a serializer's instance as one object, even with many=True
        return self.get_paginated_response(CapacitySerializer(page, many=True).data)  # type: ignore[arg-type]


class WhatIfViewSet(BaseViewSet):
    """Would these quotas, or this gang, fit on the fleet now, and on which nodes? Nothing is changed."""

    serializer_class = WhatIfSerializer

    # An answer, nothing made: 200, not the 201 drf-spectacular assumes for a POST.
    @extend_schema(request=WhatIfSerializer, responses={200: WhatIfAnswerSerializer})
    def create(self, request: Request) -> Response:
        serializer = WhatIfSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        if "quotas" in data:
            asks = [what_if.QuotaAsk(**q) for q in data["quotas"]]
            answer = what_if.quotas(self.visible_tenants(), asks, data["host_cluster"])
        else:
            gang = dict(data["gang"])
            topology = gang.pop("topology", None) or {"level": "rack", "mode": "preferred"}
            ask = what_if.GangAsk(**gang, level=topology["level"], required=topology["mode"] == "required")
            answer = what_if.gang(self.visible_tenants(), ask, data["host_cluster"])
        return Response(WhatIfAnswerSerializer(answer).data)
