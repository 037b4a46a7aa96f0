"""The base every API view builds on: who is calling, idempotent POSTs, and tenant scoping."""

from __future__ import annotations

import hashlib
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import QuerySet
from django.http import Http404
from rest_framework import viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from core.audit import Actor
from core.models import IdempotencyRecord
from gpucloud.api.problems import Replay
from gpucloud.errors import Conflict, IdempotencyKeyReused, ServiceError
from tenants.models import ApiToken, Tenant
from tenants.selectors import forbidden, tenant_for, tenants_for, visible_tenants


class IdempotencyMixin:
    """Honours `Idempotency-Key` on POST: the first response is stored and replayed for repeats.

    A repeat with a different body is refused (422); a repeat while the first is still running gets 409.
    Responses of 5xx are not stored, so the client may retry them.
    """

    HEADER = "Idempotency-Key"
    # False where the response holds a secret shown once (a new token): it must never be stored to replay.
    idempotent_replay = True

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)  # type: ignore[misc]
        key = request.headers.get(self.HEADER, "")
        if request.method != "POST" or not key or not request.user.is_authenticated:
            return
        if not self.idempotent_replay:
            raise ServiceError(
                "this endpoint answers with a secret shown once, so it cannot replay answers: "
                "send it without an Idempotency-Key",
                errors={self.HEADER: ["not accepted here"]},
            )
        if len(key) > 200:
            raise ServiceError(
                "Idempotency-Key is longer than 200 characters", errors={self.HEADER: ["too long"]}
            )
        fingerprint = hashlib.sha256(
            request.method.encode() + request.path.encode() + b"\0" + request.body
        ).hexdigest()
        try:
            with transaction.atomic():
                record = IdempotencyRecord.objects.create(user=request.user, key=key, fingerprint=fingerprint)
        except IntegrityError:
            self._replay(IdempotencyRecord.objects.get(user=request.user, key=key), fingerprint)
        request._idempotency_record = record  # type: ignore[attr-defined]

    def _replay(self, record: IdempotencyRecord, fingerprint: str) -> None:
        if record.fingerprint != fingerprint:
            raise IdempotencyKeyReused(
                "this Idempotency-Key was already used for a different request; use a new key",
                errors={self.HEADER: ["reused with a different request"]},
            )
        if record.status_code is None:
            raise Conflict("a request with this Idempotency-Key is still being processed")
        raise Replay(
            Response(record.body, status=record.status_code, headers={"Idempotent-Replayed": "true"})
        )

    def finalize_response(self, request: Request, response: Response, *args: Any, **kwargs: Any) -> Any:
        record = getattr(request, "_idempotency_record", None)
        if record is not None:
            if response.status_code >= 500:
                record.delete()
            else:
                record.status_code = response.status_code
                record.body = response.data
                record.save(update_fields=["status_code", "body"])
        return super().finalize_response(request, response, *args, **kwargs)  # type: ignore[misc]


class DryRunMixin:
    """`?dry_run=true` on a write: the whole request runs (validation, admission, locks, audit) in a
    transaction that is then rolled back, so the answer is exactly what the write would get, and nothing
    stays. Terraform's `plan` asks this way. Only views that write nothing outside the database say
    `dry_run_allowed`; elsewhere the parameter is refused, never quietly ignored (that would write for real).
    """

    PARAMETER = "dry_run"
    dry_run_allowed = False

    def dispatch(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        if request.method in ("GET", "HEAD", "OPTIONS") or self.PARAMETER not in request.GET:
            return super().dispatch(request, *args, **kwargs)  # type: ignore[misc]
        with transaction.atomic():
            response = super().dispatch(request, *args, **kwargs)  # type: ignore[misc]
            transaction.set_rollback(True)  # also drops every on_commit task the services enqueued
        response["Dry-Run"] = "true"
        return response

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        # Authentication and permissions first: a stranger learns nothing from how dry_run is refused.
        # (Everything this request writes, an idempotency record included, is rolled back by dispatch.)
        super().initial(request, *args, **kwargs)  # type: ignore[misc]
        value = request.query_params.get(self.PARAMETER)
        if value is None or request.method in ("GET", "HEAD", "OPTIONS"):
            return
        if not self.dry_run_allowed:
            raise ServiceError(
                "this endpoint has no dry run; it is offered by the writes of /tenants/, "
                "/tenants/{slug}/members/, /tenants/{slug}/quotas/ and /host-clusters/{name}/retire/ "
                "(POST /apply/ takes dryRun in its body)",
                errors={self.PARAMETER: ["not offered here"]},
            )
        if value not in ("true", "1"):
            raise ServiceError(
                f"dry_run must be true or 1, not {value!r}", errors={self.PARAMETER: ["true or 1"]}
            )


class BaseViewSet(DryRunMixin, IdempotencyMixin, viewsets.GenericViewSet[Any]):
    """Scoping starts here: `visible_tenants()` is every tenant the caller may see, and nothing else.

    The 403/404 rule of `tenants.selectors` is applied here for every view whose objects belong to a tenant:
    lists take their tenants from `scope(permission)`, a tenant named in a body from `tenant_named`, and an
    object looked up by URL that belongs to a tenant of the caller's whose role lacks `read_permission` is
    403 naming the roles (`tenant_field` says how an object names its tenant), another tenant's is 404.
    """

    read_permission = "tenant.view"
    tenant_field: str | None = None

    def actor(self) -> Actor:
        auth = self.request.auth
        if isinstance(auth, ApiToken):
            return Actor.of(self.request.user, auth.name, scope=auth.scope)
        return Actor.of(self.request.user)

    def visible_tenants(self, permission: str = "tenant.view") -> QuerySet[Tenant]:
        return visible_tenants(self.request.user, permission)

    def scope(self, permission: str) -> QuerySet[Tenant]:
        """The tenants this request reaches for `permission`. A list narrowed by `?tenant=` gets that tenant
        (404 if not theirs, 403 naming the roles if theirs without the permission); an unnarrowed list is
        refused (403) to someone who holds the permission in none of their tenants; a lookup by URL gets
        every tenant where they hold it (`get_object` tells a member's refusal from another tenant's 404)."""
        user = self.request.user
        if getattr(self, "detail", False) or self.request.method not in ("GET", "HEAD"):
            return visible_tenants(user, permission)
        slug = self.request.query_params.get("tenant")
        if slug:
            return Tenant.objects.filter(pk=tenant_for(user, slug, permission).pk)
        return tenants_for(user, permission)

    def tenant_named(self, slug: str, permission: str) -> Tenant:
        """A tenant named in a request's body, by the same rule (404 not theirs, 403 naming the roles)."""
        return tenant_for(self.request.user, slug, permission)

    def get_object(self) -> Any:
        try:
            return super().get_object()
        except Http404:
            self._refuse_a_member()
            raise

    def _refuse_a_member(self) -> None:
        """The object is not in the caller's scope: if it belongs to a tenant of theirs, say which roles may
        read it (403); else it stays "not found", as another tenant's object must."""
        if self.tenant_field is None:
            return
        kwarg = self.lookup_url_kwarg or self.lookup_field
        lookup = {
            self.lookup_field: self.kwargs[kwarg],
            f"{self.tenant_field}__in": visible_tenants(self.request.user),
        }
        model = self.get_queryset().model
        slug = (
            model._default_manager.filter(**lookup)
            .values_list(f"{self.tenant_field}__slug", flat=True)
            .first()
        )
        if slug is not None:
            raise forbidden(self.read_permission, slug)
