"""Manifests over HTTP (`/schemas/`, `/apply/`) and GitOps sources (`/gitops/sources/`, their webhook)."""

from __future__ import annotations

import json
from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import mixins, status
from rest_framework.decorators import action
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response

from core.permissions import is_platform_admin
from gitops import services
from gitops.api.serializers import (
    ApplyResultSerializer,
    ApplySerializer,
    GitSourceSerializer,
    KindSerializer,
    WebhookAnswerSerializer,
)
from gitops.apply import apply
from gitops.manifests import KINDS, SCHEMAS, ManifestInvalid, from_bodies
from gitops.models import GitSource
from gitops.ownership import request_source
from gpucloud.errors import Conflict, NotFound, PermissionDenied, ServiceError
from tenants.api.viewsets import BaseViewSet
from tenants.models import ApiToken


class ManifestRejected(ServiceError):
    """Manifests that were not applied (nothing of them was): `problems` names file, line, field, reason."""

    type = "manifest-rejected"
    title = "The manifests were not applied"

    def __init__(self, exc: ManifestInvalid) -> None:
        errors: dict[str, list[str]] = {}
        for p in exc.problems:
            errors.setdefault(f"{p.file}:{p.field}" if p.field else p.file, []).append(p.reason)
        detail = "nothing was applied: " + "; ".join(str(p) for p in exc.problems[:5])
        super().__init__(detail, errors=errors, problems=[p.as_dict() for p in exc.problems])
        self.status = exc.status


class SchemaViewSet(BaseViewSet):
    """The JSON Schema of each manifest kind, for editors and CI (public, like the OpenAPI schema)."""

    permission_classes = [AllowAny]
    lookup_url_kwarg = "kind"
    serializer_class = KindSerializer
    filter_backends: list[type] = []  # a fixed list of kinds: nothing to filter

    @extend_schema(operation_id="schemas_list")
    def list(self, request: Request) -> Response:
        kinds = [{"kind": k, "url": request.build_absolute_uri(f"{k}/")} for k in KINDS]
        return self.get_paginated_response(self.paginate_queryset(kinds))

    @extend_schema(
        parameters=[OpenApiParameter("kind", str, OpenApiParameter.PATH, description="Tenant, RateCard …")],
        responses={
            (200, "application/schema+json"): OpenApiResponse(OpenApiTypes.OBJECT, description="JSON Schema")
        },
    )
    def retrieve(self, request: Request, kind: str) -> Response:
        found = {k.lower(): k for k in KINDS}.get(kind.lower())
        if found is None:
            raise NotFound(f"there is no manifest kind {kind!r}; kinds: {', '.join(KINDS)}")
        return Response(SCHEMAS[found], content_type="application/schema+json")


class ApplyViewSet(BaseViewSet):
    """Apply manifests, all or nothing, through the same services (and rules) as every other endpoint."""

    serializer_class = ApplySerializer

    @extend_schema(request=ApplySerializer, responses={200: ApplyResultSerializer})
    def create(self, request: Request) -> Response:
        serializer = ApplySerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        if data["prune"] and not is_platform_admin(request.user):
            raise PermissionDenied("pruning removes objects of any tenant: platform administrators only")
        actor = self.actor()
        token = request.auth if isinstance(request.auth, ApiToken) else None
        source = request_source(actor, data.get("source"), bound=token.source if token else "")
        try:
            result = apply(
                from_bodies(data["documents"]),
                actor=actor,
                source=source,
                prune=data["prune"],
                dry_run=data["dryRun"],
                tenants=self.visible_tenants(),
                take_ownership=data["takeOwnership"],
            )
        except ManifestInvalid as exc:
            raise ManifestRejected(exc) from exc
        return Response(result.as_dict())


class _AdminOnly(BaseViewSet):
    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        if self.action != "webhook" and not is_platform_admin(request.user):
            raise PermissionDenied("GitOps sources are managed by platform administrators only")


WRITABLE = ("url", "branch", "path", "interval", "username", "password", "webhook_secret")


class GitSourceViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.DestroyModelMixin, _AdminOnly
):
    """Git repositories whose manifests are kept applied; each shows its last revision, state and error."""

    serializer_class = GitSourceSerializer
    queryset = GitSource.objects.order_by("name")
    lookup_field = "name"

    def create(self, request: Request) -> Response:
        serializer = GitSourceSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        source = services.create_source(actor=self.actor(), **serializer.validated_data)
        services.request_sync(source)
        return Response(GitSourceSerializer(source).data, status=status.HTTP_201_CREATED)

    def partial_update(self, request: Request, name: str) -> Response:
        source = self.get_object()
        serializer = GitSourceSerializer(source, data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        fields = {k: v for k, v in serializer.validated_data.items() if k in WRITABLE}
        source = services.update_source(actor=self.actor(), source=source, **fields)
        return Response(GitSourceSerializer(source).data)

    def perform_destroy(self, instance: GitSource) -> None:
        services.delete_source(actor=self.actor(), source=instance)

    @extend_schema(request=None, responses={202: GitSourceSerializer})
    @action(detail=True, methods=["post"])
    def sync(self, request: Request, name: str) -> Response:
        """Sync now (in a worker); the source's state, revision and error show the outcome."""
        source = self.get_object()
        services.request_sync(source)
        return Response(GitSourceSerializer(source).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(
        request=OpenApiTypes.OBJECT,
        responses={202: WebhookAnswerSerializer, 200: WebhookAnswerSerializer},
        parameters=[
            OpenApiParameter("X-Hub-Signature-256", str, OpenApiParameter.HEADER, description="GitHub"),
            OpenApiParameter("X-Gitea-Signature", str, OpenApiParameter.HEADER, description="Gitea"),
            OpenApiParameter("X-Gitlab-Token", str, OpenApiParameter.HEADER, description="GitLab"),
        ],
    )
    @action(detail=True, methods=["post"], permission_classes=[AllowAny], authentication_classes=[])
    def webhook(self, request: Request, name: str) -> Response:
        """A push webhook from GitHub, GitLab or Gitea, signed with the source's webhook secret.

        A source that does not exist and a signature that does not match answer the same 404, so the
        webhook tells a stranger nothing; a delivery received before is a replay (409) and queues nothing.
        """
        source = GitSource.objects.filter(name=name).first()
        if source is None or not services.signature_valid(source, request.headers, request.body):
            raise NotFound(
                f"there is no GitOps source {name!r} whose webhook secret signed this request "
                "(X-Hub-Signature-256, X-Gitea-Signature or X-Gitlab-Token)"
            )
        if not services.record_delivery(source, request.headers, request.body):
            raise Conflict("this webhook delivery was received before; a replay queues nothing")
        if request.headers.get("X-GitHub-Event") == "ping":
            return Response({"queued": False, "pong": True})
        try:
            ref = json.loads(request.body or b"{}").get("ref")
        except (ValueError, AttributeError):
            ref = None
        if ref and ref != f"refs/heads/{source.branch}":
            return Response(
                {"queued": False, "reason": f"a push to {ref}, not to {source.branch}"}, status=202
            )
        services.request_sync(source)
        return Response({"queued": True}, status=status.HTTP_202_ACCEPTED)
