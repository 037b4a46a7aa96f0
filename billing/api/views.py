"""Usage, rate cards, invoices, budgets, metering status. Views only translate HTTP to services and back."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import django_filters
from django.db.models import QuerySet
from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import mixins, status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from billing import exports, selectors
from billing.api.serializers import (
    BudgetSerializer,
    BudgetWriteSerializer,
    CollectionSourceSerializer,
    FeasibilityAnswerSerializer,
    FeasibilitySerializer,
    InvoiceDraftSerializer,
    InvoiceSerializer,
    RateCardRetireSerializer,
    RateCardSerializer,
    ScrapeRecordSerializer,
    StandingSerializer,
    UsageSerializer,
)
from billing.models import Budget, CollectionSource, Invoice, RateCard, ScrapeRecord
from billing.services import budgets, invoicing, quote, rates
from billing.standing import standing_of
from core.permissions import is_platform_admin
from fleet.models import GpuClass
from gpucloud.errors import PermissionDenied, ValidationFailed
from placement import queue_estimate
from tenants.api.views import TenantChildViewSet
from tenants.api.viewsets import BaseViewSet
from tenants.models import Tenant
from tenants.services import roles


def _when(request: Request, name: str) -> datetime | None:
    raw = request.query_params.get(name)
    if not raw:
        return None
    try:
        moment = datetime.fromisoformat(raw)
    except ValueError:
        raise ValidationFailed.on(
            name, f"{raw!r} is not an ISO 8601 date or time (2026-05-01T00:00:00Z)"
        ) from None
    if moment.tzinfo is None:
        raise ValidationFailed.on(name, f"{raw!r} has no time zone; add Z or +00:00")
    try:  # in UTC before it reaches the database: PostgreSQL refuses offsets beyond ±15:59
        return moment.astimezone(UTC)
    except OverflowError:
        raise ValidationFailed.on(name, f"{raw!r} is out of range") from None


@extend_schema(
    parameters=[
        OpenApiParameter("tenant", str, description="tenant slug; default: every tenant you can see"),
        OpenApiParameter("start", OpenApiTypes.DATETIME, description="from this hour (inclusive)"),
        OpenApiParameter("end", OpenApiTypes.DATETIME, description="until this hour (exclusive)"),
        OpenApiParameter("group_by", str, enum=list(selectors.GROUPS), description="default gpu_class"),
    ]
)
class UsageViewSet(mixins.ListModelMixin, BaseViewSet):
    """GPU-seconds, utilised GPU-seconds and joules from the ledger, per tenant and GPU class."""

    serializer_class = UsageSerializer
    filter_backends: list[Any] = []

    def get_queryset(self) -> QuerySet[Any]:
        request = self.request
        group_by = request.query_params.get("group_by", "gpu_class")
        if group_by not in selectors.GROUPS:
            raise ValidationFailed.on(
                "group_by", f"{group_by!r} is not one of: {', '.join(selectors.GROUPS)}"
            )
        return selectors.usage(
            tenants=self.scope("billing.view"),
            include_platform=not request.query_params.get("tenant") and is_platform_admin(request.user),
            start=_when(request, "start"),
            end=_when(request, "end"),
            group_by=group_by,
        )


class RateCardViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, BaseViewSet):
    """Rate cards: prices per GPU-hour per GPU class, versioned. Platform administrators write them, delete
    one no issued invoice used, and retire one that was (an end date from which it no longer applies)."""

    serializer_class = RateCardSerializer
    lookup_field = "public_id"
    lookup_url_kwarg = "id"
    queryset = RateCard.objects.order_by("-effective_from", "-version")

    def create(self, request: Request) -> Response:
        serializer = RateCardSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        card = rates.create_rate_card(
            actor=self.actor(),
            effective_from=data["effective_from"],
            prices=data["prices"],
            currency=data.get("currency", "USD"),
            tier_multipliers=data.get("tier_multipliers", {}),
            note=data.get("note", ""),
        )
        return Response(RateCardSerializer(card).data, status=status.HTTP_201_CREATED)

    @extend_schema(responses={204: None})
    def destroy(self, request: Request, id: str) -> Response:
        """Delete a card no issued invoice used; a used one is a 409 (`rate-card-in-use`): retire it."""
        rates.delete_rate_card(actor=self.actor(), card=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(request=RateCardRetireSerializer, responses={200: RateCardSerializer})
    @action(detail=True, methods=["post"])
    def retire(self, request: Request, id: str) -> Response:
        """End a card from `effective_until` (default now): the card that would be in force without it
        applies again from then on."""
        serializer = RateCardRetireSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        card = rates.retire_rate_card(
            actor=self.actor(),
            card=self.get_object(),
            effective_until=serializer.validated_data.get("effective_until"),
        )
        return Response(RateCardSerializer(card).data)


FILE_RESPONSE = {(200, "text/csv"): OpenApiResponse(OpenApiTypes.STR, description="a CSV file")}
FOCUS_VERSION = OpenApiParameter(
    "focus_version", str, enum=list(exports.FOCUS_VERSIONS), description=f"default {exports.FOCUS_VERSION}"
)


def parse_month(text: str) -> tuple[int, int]:
    """`YYYY-MM` as (year, month); the service checks the range."""
    if not re.fullmatch(r"\d{4}-\d{2}", text):
        raise ValidationFailed.on("month", f"{text!r} is not a month written YYYY-MM")
    year, month = text.split("-")
    return int(year), int(month)


class InvoiceFilter(django_filters.FilterSet):
    tenant = django_filters.CharFilter(field_name="tenant__slug", help_text="tenant slug")

    class Meta:
        model = Invoice
        fields = ["tenant", "state"]


class InvoiceViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, BaseViewSet):
    """Monthly invoices per tenant: drafts recomputed from the ledger, issued ones never change."""

    serializer_class = InvoiceSerializer
    filterset_class = InvoiceFilter
    lookup_field = "public_id"
    lookup_url_kwarg = "id"
    read_permission = "billing.view"
    tenant_field = "tenant"

    def get_queryset(self) -> QuerySet[Invoice]:
        return (
            Invoice.objects.filter(tenant__in=self.scope(self.read_permission))
            .select_related("tenant__cluster__host_cluster")
            .prefetch_related("lines")
            .order_by("-period_start", "tenant__slug")
        )

    @extend_schema(request=InvoiceDraftSerializer, responses={201: InvoiceSerializer})
    def create(self, request: Request) -> Response:
        """Compute (or recompute) the tenant's draft invoice of a month."""
        serializer = InvoiceDraftSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        tenant = self.tenant_named(serializer.validated_data["tenant"], self.read_permission)
        year, month = parse_month(serializer.validated_data["month"])
        invoice = invoicing.draft_invoice(actor=self.actor(), tenant=tenant, year=year, month=month)
        return Response(InvoiceSerializer(self.get_queryset().get(pk=invoice.pk)).data, status=201)

    @extend_schema(request=None, responses={200: InvoiceSerializer})
    @action(detail=True, methods=["post"])
    def issue(self, request: Request, id: str) -> Response:
        invoice = invoicing.issue_invoice(actor=self.actor(), invoice=self.get_object())
        return Response(InvoiceSerializer(self.get_queryset().get(pk=invoice.pk)).data)

    @extend_schema(responses=FILE_RESPONSE)
    @action(detail=True, methods=["get"], url_path="csv")
    def csv(self, request: Request, id: str) -> HttpResponse:
        return self._download([self.get_object()], "csv", id)

    @extend_schema(responses=FILE_RESPONSE, parameters=[FOCUS_VERSION])
    @action(detail=True, methods=["get"], url_path="focus")
    def focus(self, request: Request, id: str) -> HttpResponse:
        return self._download([self.get_object()], "focus", id)

    @extend_schema(
        parameters=[
            OpenApiParameter("month", str, required=True, description="YYYY-MM"),
            OpenApiParameter("as", str, enum=["csv", "focus"], description="default focus"),
            FOCUS_VERSION,
        ],
        responses=FILE_RESPONSE,
    )
    @action(detail=False, methods=["get"], url_path="export")
    def export(self, request: Request) -> HttpResponse:
        """Every invoice of a month you can see: one tenant's, or platform-wide for administrators."""
        month = request.query_params.get("month", "")
        what = request.query_params.get("as", "focus")  # not `format`: DRF reads that for content negotiation
        if what not in ("csv", "focus"):
            raise ValidationFailed.on("as", f"{what!r} is not csv or focus")
        start, _ = invoicing.month_bounds(*parse_month(month))
        invoices = list(self.get_queryset().filter(period_start=start))
        return self._download(invoices, what, f"{month}")

    def _download(self, invoices: list[Invoice], what: str, name: str) -> HttpResponse:
        version = self.request.query_params.get("focus_version", exports.FOCUS_VERSION)
        if what == "focus" and version not in exports.FOCUS_VERSIONS:
            raise ValidationFailed.on(
                "focus_version",
                f"{version!r} is not a FOCUS version offered: {', '.join(exports.FOCUS_VERSIONS)}",
            )
        tenants = {i.tenant for i in invoices}
        invoicing.record_export(
            actor=self.actor(),
            tenant=next(iter(tenants)) if len(tenants) == 1 else None,
            what=what,
            object_id=name,
        )
        text = exports.invoices_csv(invoices) if what == "csv" else exports.invoices_focus(invoices, version)
        response = HttpResponse(text, content_type="text/csv")
        response["Content-Disposition"] = f'attachment; filename="{name}-{what}.csv"'
        return response


class BudgetViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, BaseViewSet):
    """Monthly budgets per tenant, with the alerts raised at 50, 80 and 100 %."""

    serializer_class = BudgetSerializer
    lookup_field = "tenant__slug"
    lookup_url_kwarg = "tenant"
    read_permission = "billing.view"
    tenant_field = "tenant"

    def get_queryset(self) -> QuerySet[Budget]:
        return (
            Budget.objects.filter(tenant__in=self.scope(self.read_permission))
            .select_related("tenant")
            .prefetch_related("alerts")
            .order_by("tenant__slug")
        )

    @extend_schema(request=BudgetWriteSerializer, responses={201: BudgetSerializer})
    def create(self, request: Request) -> Response:
        """Set (or replace) a tenant's budget."""
        serializer = BudgetWriteSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = dict(serializer.validated_data)
        tenant = self.tenant_named(data.pop("tenant"), self.read_permission)
        budget = budgets.set_budget(actor=self.actor(), tenant=tenant, **data)
        return Response(BudgetSerializer(self.get_queryset().get(pk=budget.pk)).data, status=201)


class _AdminOnly(BaseViewSet):
    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        if not is_platform_admin(request.user):
            raise PermissionDenied("metering status is shown to platform administrators only")


class CollectionSourceViewSet(mixins.ListModelMixin, _AdminOnly):
    """How each host cluster's usage is collected and how its last round went."""

    serializer_class = CollectionSourceSerializer
    queryset = CollectionSource.objects.select_related("host_cluster").order_by("host_cluster__name")


class ScrapeRecordViewSet(mixins.ListModelMixin, _AdminOnly):
    """Every node scrape: status, reason and the garbled, late, duplicate and gap counts."""

    serializer_class = ScrapeRecordSerializer
    queryset = ScrapeRecord.objects.select_related("host_cluster").order_by("-at", "node")
    filterset_fields = ["status", "node", "source"]


class StandingView(TenantChildViewSet):
    """Where the tenant stands now: per GPU class guaranteed, burst, in use, borrowed and lent; its running
    pods' GPU utilisation, idle first. Every role of the tenant; the money fields only for roles that may see
    cost (`billing.view`). How each figure is made: `billing.standing`, docs/api.md."""

    read_permission = "usage.view"

    @extend_schema(responses={200: StandingSerializer}, operation_id="tenants_standing_retrieve")
    def retrieve(self, request: Request, tenant_slug: str) -> Response:
        tenant = self.tenant()
        with_cost = roles.can(self.actor(), tenant, "billing.view")
        data = standing_of(tenant, with_cost=with_cost)
        return Response(StandingSerializer(data, context={"with_cost": with_cost}).data)


Ahead = Callable[[Tenant], Sequence[tuple[GpuClass, int, str]]]


class FeasibilityView(BaseViewSet):
    """Could N units of a class start for this tenant now, and if not when, where, which quota, at what price?
    Nothing is created. Every role of the tenant may ask; the price is shown to roles that may see cost.

    The ask goes behind the tenant's waiting workloads as `ahead_of` gives them: the tenant's queue is
    clusters' (`clusters.queue.ahead`), a neighbour of billing, so the URL configuration hands it in
    (`behind`), as it hands the health events their rule."""

    @classmethod
    def behind(cls, rule: Ahead) -> type[FeasibilityView]:
        """This view, putting each ask behind the workloads `rule` says wait for the tenant."""

        def ahead_of(self: FeasibilityView, tenant: Tenant) -> Sequence[tuple[GpuClass, int, str]]:
            return rule(tenant)

        return type(cls.__name__, (cls,), {"ahead_of": ahead_of})

    def ahead_of(self, tenant: Tenant) -> Sequence[tuple[GpuClass, int, str]]:
        """What waits ahead of an ask of the tenant; nothing until a rule is given."""
        return ()

    @extend_schema(
        request=FeasibilitySerializer,
        responses={200: FeasibilityAnswerSerializer},
        operation_id="tenants_feasibility_create",
    )
    def create(self, request: Request, tenant_slug: str) -> Response:
        tenant = self.tenant_named(tenant_slug, "tenant.view")
        serializer = FeasibilitySerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        answer = queue_estimate.feasibility(
            tenant, data["gpu_class"], data["count"], data["hours"], ahead=self.ahead_of(tenant)
        )
        price = None
        if roles.can(self.actor(), tenant, "billing.view"):
            price = quote.quote(tenant, answer.gpu_class, answer.count, answer.hours)
        body = FeasibilityAnswerSerializer(answer).data
        return Response({**body, "price": price})
