"""Errors every app raises.

`TemporaryError` and `PermanentError` sort failures of background work (kopf's split): the task decorator
(`gpucloud.tasks`) retries a temporary one with backoff; a permanent one is recorded on the object and
shown to the user. `ServiceError` and its kinds are refusals the API turns into RFC 9457 problem responses.
"""

from __future__ import annotations

from typing import Any


class TemporaryError(Exception):
    """Worth retrying later (a timeout, a busy lock, a 409/429/5xx from a cluster): tasks retry it."""


class PermanentError(Exception):
    """Retrying will not help until someone changes something: recorded on the object, never retried."""


class ServiceError(Exception):
    """A refusal with a message meant for the caller."""

    status = 400
    type = "invalid-request"
    title = "The request is not valid"

    def __init__(self, detail: str, *, errors: dict[str, list[str]] | None = None, **extra: Any) -> None:
        super().__init__(detail)
        self.detail = detail
        self.errors = errors or {}
        self.extra = extra


class ValidationFailed(ServiceError):
    """Input that breaks a rule: the field errors say which and what is allowed."""

    @classmethod
    def on(cls, field: str, message: str) -> ValidationFailed:
        return cls(message, errors={field: [message]})


class NotFound(ServiceError):
    status = 404
    type = "not-found"
    title = "Not found"


class PermissionDenied(ServiceError):
    status = 403
    type = "forbidden"
    title = "Not allowed"


class Conflict(ServiceError):
    status = 409
    type = "conflict"
    title = "The request conflicts with the current state"


class ManagedBySource(Conflict):
    """A change to what a GitOps source (or a custom resource) declares: its next sync would undo it."""

    type = "managed-by-source"
    title = "This is declared elsewhere, which would undo the change"


class CapacityExceeded(ServiceError):
    status = 422
    type = "quota-exceeds-capacity"
    title = "Not enough capacity for this guarantee"


class TierForbidsClass(ServiceError):
    """A GPU class the tenant's trust tier may not hold (`tenants.tiers`)."""

    status = 422
    type = "trust-tier-forbids-class"
    title = "The tenant's trust tier does not allow this GPU class"


class IdempotencyKeyReused(ServiceError):
    """An `Idempotency-Key` sent again with another request: the first answer cannot stand for it."""

    status = 422
    type = "idempotency-key-reused"
    title = "This Idempotency-Key was used for another request"


class Busy(ServiceError, TemporaryError):
    """Concurrent changes kept the database from completing this one (a deadlock or a serialization failure,
    still there after the retries of `gpucloud.transactions`): nothing was changed, and sending it again will
    do. A 503 with Retry-After for a request; a task retries it like any temporary error."""

    status = 503
    type = "busy"
    title = "Busy with concurrent changes; try again"
