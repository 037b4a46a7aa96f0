"""The base every API view builds on: who is calling, idempotent POSTs, and tenant scoping."""

from __future__ import annotations

import hashlib
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import QuerySet
from rest_framework import viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from gpucloud.api.problems import Replay
from gpucloud.errors import Conflict, IdempotencyKeyReused, ServiceError
from tenants.audit import Actor
from tenants.models import ApiToken, IdempotencyRecord, Tenant
from tenants.selectors import visible_tenants


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
                "/tenants/{slug}/members/ and /tenants/{slug}/quotas/ "
                "(POST /apply/ takes dryRun in its body)",
                errors={self.PARAMETER: ["not offered here"]},
            )
        if value not in ("true", "1"):
            raise ServiceError(
                f"dry_run must be true or 1, not {value!r}", errors={self.PARAMETER: ["true or 1"]}
            )


class BaseViewSet(DryRunMixin, IdempotencyMixin, viewsets.GenericViewSet):
    """Scoping starts here: `visible_tenants()` is every tenant the caller may see, and nothing else."""

    def actor(self) -> Actor:
        auth = self.request.auth
        if isinstance(auth, ApiToken):
            return Actor.of(self.request.user, auth.name, scope=auth.scope)
        return Actor.of(self.request.user)

    def visible_tenants(self, permission: str = "tenant.view") -> QuerySet[Tenant]:
        return visible_tenants(self.request.user, permission)
