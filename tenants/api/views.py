"""Tenants, their members and quotas. Views only translate HTTP to service calls and back."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
from collections.abc import Iterable, Iterator
from typing import Any

import django_filters
from django.db import transaction
from django.db.models import QuerySet
from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status
from rest_framework.decorators import action
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from core.models import AuditEvent
from core.permissions import is_platform_admin
from fleet.models import GpuClass, host_cluster_named
from gpucloud import spreadsheet
from gpucloud.api.throttling import SettingsScopedThrottle
from gpucloud.errors import PermissionDenied, ValidationFailed
from tenants import invitations, tokens
from tenants.api.serializers import (
    AuditEventSerializer,
    InvitationSerializer,
    MemberRoleSerializer,
    MemberSerializer,
    QuotaSerializer,
    QuotaValuesSerializer,
    ScimTokenCreateSerializer,
    TenantSerializer,
    TenantUpdateSerializer,
    TokenCreatedSerializer,
    TokenCreateSerializer,
    TokenSerializer,
)
from tenants.api.viewsets import BaseViewSet
from tenants.models import ApiToken, Invitation, Membership, Quota, Tenant
from tenants.services import lifecycle, members, quotas
from tenants.services.sleep import set_sleep_settings, wake_tenant


class TenantFilter(django_filters.FilterSet):
    class Meta:
        model = Tenant
        fields = ["state", "trust_tier"]


class TenantViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    BaseViewSet,
):
    """Tenants: each a team with one tenant cluster, members and quotas."""

    dry_run_allowed = True
    serializer_class = TenantSerializer
    filterset_class = TenantFilter
    lookup_field = "slug"
    lookup_value_regex = "[a-z0-9-]+"

    def get_queryset(self) -> QuerySet[Tenant]:
        tenants = self.visible_tenants().select_related("cluster__host_cluster")
        return tenants.prefetch_related("dedicated_nodes__node").order_by("slug")

    def create(self, request: Request) -> Response:
        serializer = TenantSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        tenant = lifecycle.create_tenant(
            actor=self.actor(),
            slug=data["slug"],
            display_name=data.get("display_name", ""),
            trust_tier=data.get("trust_tier", Tenant.TrustTier.STANDARD),
            host_cluster=host_cluster_named(data.get("host_cluster")),
        )
        return Response(TenantSerializer(tenant).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=TenantUpdateSerializer, responses=TenantSerializer)
    def partial_update(self, request: Request, slug: str) -> Response:
        serializer = TenantUpdateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = dict(serializer.validated_data)
        sleep = {key: data.pop(key) for key in ("sleep_after_inactivity", "sleep_when_idle") if key in data}
        with transaction.atomic():  # all of the change or none of it
            tenant = lifecycle.update_tenant(actor=self.actor(), tenant=self.get_object(), **data)
            if sleep:
                tenant = set_sleep_settings(actor=self.actor(), tenant=tenant, **sleep)
        return Response(TenantSerializer(tenant).data)

    @extend_schema(responses={202: TenantSerializer})
    def destroy(self, request: Request, slug: str) -> Response:
        tenant = lifecycle.delete_tenant(actor=self.actor(), tenant=self.get_object())
        return Response(TenantSerializer(tenant).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(request=None, responses={202: TenantSerializer})
    @action(detail=True, methods=["post"])
    def suspend(self, request: Request, slug: str) -> Response:
        tenant = lifecycle.suspend_tenant(actor=self.actor(), tenant=self.get_object())
        return Response(TenantSerializer(tenant).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(request=None, responses={202: TenantSerializer})
    @action(detail=True, methods=["post"])
    def resume(self, request: Request, slug: str) -> Response:
        tenant = lifecycle.resume_tenant(actor=self.actor(), tenant=self.get_object())
        return Response(TenantSerializer(tenant).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(request=None, responses={202: TenantSerializer})
    @action(detail=True, methods=["post"])
    def wake(self, request: Request, slug: str) -> Response:
        """Wake a cluster gpucloud put to sleep when idle (or clear the idle flag); its lent quota returns."""
        tenant = wake_tenant(actor=self.actor(), tenant=self.get_object())
        return Response(TenantSerializer(tenant).data, status=status.HTTP_202_ACCEPTED)


class TenantChildViewSet(BaseViewSet):
    """Base of the views nested under /tenants/{slug}/: the tenant is looked up in the caller's scope.

    Another tenant is "not found"; a tenant the caller belongs to without `read_permission` is "forbidden".
    """

    def tenant(self) -> Tenant:
        if not hasattr(self, "_tenant"):
            self._tenant = self.tenant_named(self.kwargs["tenant_slug"], self.read_permission)
        return self._tenant


class MemberViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, TenantChildViewSet):
    """People with a role in a tenant."""

    dry_run_allowed = True
    serializer_class = MemberSerializer
    read_permission = "member.view"  # changes: `member.manage`, token scope `admin` (the services check both)
    lookup_field = "user__username"
    lookup_url_kwarg = "username"
    lookup_value_regex = r"[\w.@+-]+"

    def get_queryset(self) -> QuerySet[Membership]:
        if getattr(self, "swagger_fake_view", False):  # drf-spectacular: no tenant in the URL
            return Membership.objects.none()
        return (
            Membership.objects.filter(tenant=self.tenant()).select_related("user").order_by("user__username")
        )

    @extend_schema(responses={201: MemberSerializer, 202: InvitationSerializer})
    def create(self, request: Request, tenant_slug: str) -> Response:
        """Give someone a role: a username must name an account; an e-mail address names the account that has
        it (201), or else invites them (202), the role theirs at their first sign-in (`tenants.invitations`:
        the portal's and the manifests' rule too)."""
        serializer = MemberSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        row = invitations.invite(
            actor=self.actor(),
            tenant=self.tenant(),
            login=serializer.validated_data["user"]["username"],
            role=serializer.validated_data["role"],
        )
        if isinstance(row, Invitation):
            return Response(InvitationSerializer(row).data, status=status.HTTP_202_ACCEPTED)
        return Response(MemberSerializer(row).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=MemberRoleSerializer, responses=MemberSerializer)
    def partial_update(self, request: Request, tenant_slug: str, username: str) -> Response:
        serializer = MemberRoleSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        membership = members.add_member(
            actor=self.actor(),
            tenant=self.tenant(),
            username=self.get_object().user.username,
            role=serializer.validated_data["role"],
        )
        return Response(MemberSerializer(membership).data)

    def destroy(self, request: Request, tenant_slug: str, username: str) -> Response:
        members.remove_member(actor=self.actor(), tenant=self.tenant(), membership=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)


def gpu_class_named(name: str) -> GpuClass:
    gpu_class = GpuClass.objects.select_related("gpu_model").filter(name=name).first()
    if gpu_class is None:
        raise ValidationFailed.on(
            "gpu_class", f"{name!r} is not a GPU class; GET /api/v1/gpu-classes/ lists the classes"
        )
    return gpu_class


class QuotaViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, TenantChildViewSet):
    """A tenant's quotas, one per GPU class."""

    dry_run_allowed = True
    serializer_class = QuotaSerializer
    lookup_field = "gpu_class__name"
    lookup_url_kwarg = "gpu_class"
    lookup_value_regex = r"[a-z0-9.-]+"

    def get_queryset(self) -> QuerySet[Quota]:
        if getattr(self, "swagger_fake_view", False):
            return Quota.objects.none()
        return (
            Quota.objects.filter(tenant=self.tenant()).select_related("gpu_class").order_by("gpu_class__name")
        )

    def _set(self, gpu_class: GpuClass, data: dict[str, Any]) -> Response:
        quota, created = quotas.set_quota(
            actor=self.actor(),
            tenant=self.tenant(),
            gpu_class=gpu_class,
            guaranteed=data["guaranteed"],
            burst=data.get("burst", 0),
            lendable=data.get("lendable"),
            weight=data.get("weight", 1),
        )
        return Response(QuotaSerializer(quota).data, status=201 if created else 200)

    @extend_schema(responses={201: QuotaSerializer, 200: QuotaSerializer})
    def create(self, request: Request, tenant_slug: str) -> Response:
        """Set the quota of the GPU class in the body (created: 201, changed: 200)."""
        serializer = QuotaSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        return self._set(gpu_class_named(data["gpu_class"]["name"]), data)

    @extend_schema(request=QuotaValuesSerializer, responses={201: QuotaSerializer, 200: QuotaSerializer})
    def update(self, request: Request, tenant_slug: str, gpu_class: str) -> Response:
        """Set the quota of the GPU class in the URL."""
        self.tenant()
        serializer = QuotaValuesSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        return self._set(gpu_class_named(gpu_class), serializer.validated_data)

    def destroy(self, request: Request, tenant_slug: str, gpu_class: str) -> Response:
        quotas.remove_quota(actor=self.actor(), quota=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)


class TokenViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, BaseViewSet):
    """The caller's personal API tokens: listed without secrets; DELETE revokes."""

    serializer_class = TokenSerializer
    lookup_field = "public_id"
    lookup_url_kwarg = "id"
    lookup_value_regex = r"tok_[A-Za-z0-9]+"
    write_scope = ApiToken.Scope.ADMIN
    idempotent_replay = False
    throttle_classes = [SettingsScopedThrottle]
    throttle_scope = "tokens"

    def get_queryset(self) -> QuerySet[ApiToken]:
        return ApiToken.objects.filter(user=self.request.user.pk, tenant=None).select_related(
            "user", "tenant", "created_by"
        )

    def _create(self, request: Request, **where: Any) -> Response:
        serializer = TokenCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        if where:
            row, text = tokens.create_service_token(actor=self.actor(), **where, **serializer.validated_data)
        else:
            row, text = tokens.create_token(
                actor=self.actor(),
                user=self.request.user,  # type: ignore[arg-type]
                **serializer.validated_data,
            )
        body = TokenCreatedSerializer(row, context={"token": text}).data
        return Response(body, status=status.HTTP_201_CREATED)

    @extend_schema(request=TokenCreateSerializer, responses={201: TokenCreatedSerializer})
    def create(self, request: Request) -> Response:
        """Make a personal token; the answer is the only time its text is shown."""
        return self._create(request)

    @extend_schema(responses={200: TokenSerializer})
    def destroy(self, request: Request, **kwargs: Any) -> Response:
        """Revoke the token: it stops working at once and stays listed, with `revoked_at`."""
        row = tokens.revoke_token(actor=self.actor(), token=self.get_object())
        return Response(TokenSerializer(row).data)


class ServiceTokenViewSet(TokenViewSet, TenantChildViewSet):
    """A tenant's service tokens (Terraform, GitOps): each acts only in this tenant, with its scope's role."""

    read_permission = "token.manage"

    def get_queryset(self) -> QuerySet[ApiToken]:
        if getattr(self, "swagger_fake_view", False):
            return ApiToken.objects.none()
        return ApiToken.objects.filter(tenant=self.tenant()).select_related("user", "tenant", "created_by")

    @extend_schema(request=TokenCreateSerializer, responses={201: TokenCreatedSerializer})
    def create(self, request: Request, tenant_slug: str) -> Response:  # type: ignore[override]
        """Make a service token for this tenant; the answer is the only time its text is shown."""
        return self._create(request, tenant=self.tenant())


class ScimTokenViewSet(TokenViewSet):
    """Tokens for identity providers to provision people and groups over SCIM at /scim/v2/ (docs/scim.md):
    platform administrators only. DELETE revokes."""

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        if not is_platform_admin(request.user):
            raise PermissionDenied("SCIM tokens are managed by platform administrators only")

    def get_queryset(self) -> QuerySet[ApiToken]:
        return ApiToken.objects.filter(scope=ApiToken.Scope.SCIM).select_related(
            "user", "tenant", "created_by"
        )

    @extend_schema(request=ScimTokenCreateSerializer, responses={201: TokenCreatedSerializer})
    def create(self, request: Request) -> Response:
        """Make a SCIM token; the answer is the only time its text is shown."""
        serializer = ScimTokenCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        row, text = tokens.create_scim_token(actor=self.actor(), **serializer.validated_data)
        body = TokenCreatedSerializer(row, context={"token": text}).data
        return Response(body, status=status.HTTP_201_CREATED)


class UtcDateTimeFilter(django_filters.IsoDateTimeFilter):
    """An ISO 8601 time with any offset Python accepts, turned into UTC before it reaches the database
    (PostgreSQL refuses offsets beyond ±15:59)."""

    def filter(self, qs: QuerySet[Any], value: Any) -> QuerySet[Any]:
        if value is not None:
            try:
                value = value.astimezone(dt.UTC)
            except OverflowError:
                raise ValidationFailed.on(self.field_name or "time", "the time is out of range") from None
        return super().filter(qs, value)


class AuditEventFilter(django_filters.FilterSet):
    tenant = django_filters.CharFilter(field_name="tenant__slug")
    actor = django_filters.CharFilter(field_name="actor_label")
    action = django_filters.CharFilter()
    since = UtcDateTimeFilter(field_name="created_at", lookup_expr="gte")
    until = UtcDateTimeFilter(field_name="created_at", lookup_expr="lt")

    class Meta:
        model = AuditEvent
        fields = ["tenant", "actor", "action", "since", "until"]


class CsvRenderer(BaseRenderer):
    """Lets `Accept: text/csv` (or `?format=csv`) reach the export; the export writes its own body."""

    media_type = "text/csv"
    format = "csv"

    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None) -> Any:
        return data if isinstance(data, str | bytes) else json.dumps(data)


CSV_COLUMNS = AuditEventSerializer.Meta.fields  # the CSV export has the API's columns


class AuditEventViewSet(mixins.ListModelMixin, BaseViewSet):
    """The audit log: platform administrators see all of it, owners and admins the events of their tenants."""

    serializer_class = AuditEventSerializer
    filterset_class = AuditEventFilter

    read_permission = "audit.view"

    def get_queryset(self) -> QuerySet[AuditEvent]:
        events = AuditEvent.objects.select_related("tenant").order_by("-created_at", "-id")
        if is_platform_admin(self.request.user) and not self.request.query_params.get("tenant"):
            return events  # platform events (no tenant) too
        return events.filter(tenant__in=self.scope(self.read_permission))

    @extend_schema(
        responses={(200, "text/csv"): OpenApiTypes.STR},
        filters=True,
        parameters=[],
        operation_id="audit_export",
    )
    @action(
        detail=False, methods=["get"], pagination_class=None, renderer_classes=[JSONRenderer, CsvRenderer]
    )
    def export(self, request: Request) -> StreamingHttpResponse:
        """The same events as the list, with the same filters, as CSV (one row per event, no paging)."""
        events = self.filter_queryset(self.get_queryset())
        rows = (AuditEventSerializer(event).data for event in events.iterator(chunk_size=500))
        response = StreamingHttpResponse(csv_lines(CSV_COLUMNS, rows), content_type="text/csv")
        response["Content-Disposition"] = 'attachment; filename="gpucloud-audit.csv"'
        return response


def csv_lines(columns: list[str], rows: Iterable[dict[str, Any]]) -> Iterator[str]:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(columns)
    for row in rows:
        values = (json.dumps(row[c]) if isinstance(row[c], dict | list) else row[c] for c in columns)
        writer.writerow(spreadsheet.row(values))  # no cell a spreadsheet would run as a formula
        yield buffer.getvalue()
        buffer.seek(0)
        buffer.truncate()
    yield buffer.getvalue()
