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


class BaseViewSet(IdempotencyMixin, viewsets.GenericViewSet):
    """Scoping starts here: `visible_tenants()` is every tenant the caller may see, and nothing else."""

    def actor(self) -> Actor:
        auth = self.request.auth
        return Actor.of(self.request.user, auth.name if isinstance(auth, ApiToken) else "")

    def visible_tenants(self, permission: str = "tenant.view") -> QuerySet[Tenant]:
        return visible_tenants(self.request.user, permission)
