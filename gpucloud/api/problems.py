"""Errors as RFC 9457 problem details (`application/problem+json`), one shape for every failure."""

from __future__ import annotations

import logging
import math
import re
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig
from django.db import DataError, IntegrityError, OperationalError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.views import defaults
from rest_framework import exceptions, status
from rest_framework.response import Response

from gpucloud.errors import Busy, Conflict, ServiceError, ValidationFailed
from gpucloud.transactions import busy, is_conflict

log = logging.getLogger(__name__)

PROBLEM_JSON = "application/problem+json"
TYPE_BASE = "/problems/"
# DRF's error codes, as the problem types docs/api.md names; a code not listed keeps its own name.
TYPES = {"permission_denied": "forbidden", "parse_error": "invalid-request"}


class Replay(Exception):
    """Carries a stored response out of the view (see IdempotencyMixin)."""

    def __init__(self, response: Response) -> None:
        self.response = response


def problem(status_code: int, title: str, detail: str, type_: str, **extra: Any) -> dict[str, Any]:
    return {"type": TYPE_BASE + type_, "title": title, "status": status_code, "detail": detail, **extra}


def _flatten(detail: Any, prefix: str = "") -> dict[str, list[str]]:
    """DRF's nested error details as {"field.sub": ["message", …]}."""
    if isinstance(detail, dict):
        errors: dict[str, list[str]] = {}
        for key, value in detail.items():
            name = "_" if key in ("non_field_errors", "detail") else str(key)
            errors.update(_flatten(value, f"{prefix}.{name}" if prefix else name))
        return errors
    if isinstance(detail, list) and detail and all(not isinstance(d, dict | list) for d in detail):
        return {prefix or "_": [str(d) for d in detail]}
    if isinstance(detail, list):
        errors = {}
        for index, item in enumerate(detail):
            errors.update(_flatten(item, f"{prefix}[{index}]"))
        return errors
    return {prefix or "_": [str(detail)]}


def _from_drf(exc: exceptions.APIException) -> dict[str, Any]:
    if isinstance(exc, exceptions.ValidationError):
        errors = _flatten(exc.detail)
        detail = "; ".join(f"{field}: {' '.join(msgs)}" for field, msgs in errors.items())
        return problem(400, "The request is not valid", detail, "invalid-request", errors=errors)
    code = exc.get_codes() if isinstance(exc.get_codes(), str) else "error"
    code = TYPES.get(str(code), str(code))
    title = {
        401: "Authentication required",
        403: "Not allowed",
        404: "Not found",
        405: "Method not allowed",
        415: "Unsupported media type",
        429: "Too many requests",
    }.get(exc.status_code, "Request failed")
    return problem(exc.status_code, title, str(exc.detail), code.replace("_", "-"))


def _from_database(exc: IntegrityError | DataError) -> exceptions.APIException | ServiceError:
    """What the database refused. A unique key taken (often by a concurrent request that won the race) is
    a 409; a value the column cannot hold is a 400. Serializers check limits first: this is the net under
    them, and it logs, so a missing limit shows."""
    cause = exc.__cause__
    diag = getattr(cause, "diag", None)
    message = (getattr(diag, "message_primary", None) or str(exc)).splitlines()[0]
    if isinstance(exc, DataError):
        log.warning("the database refused a value no validator caught: %s", message, exc_info=exc)
        return ValidationFailed(f"a value does not fit the database: {message}")
    fields = _key_fields(getattr(diag, "message_detail", None) or str(exc))
    detail = "this conflicts with an existing object"
    if fields:
        detail += f": {', '.join(fields)} must be unique and is already taken"
    return Conflict(detail, errors={field: ["already taken"] for field in fields})


def _key_fields(text: str) -> list[str]:
    """The columns of a unique key: PostgreSQL says `Key (a, b)=(…)`, SQLite `failed: table.a, table.b`."""
    if match := re.search(r"Key \((.+?)\)=", text):
        return [name.strip() for name in match.group(1).split(",")]
    if match := re.search(r"UNIQUE constraint failed: (.+)", text):
        return [name.strip().rsplit(".", 1)[-1] for name in match.group(1).split(",")]
    return []


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's EXCEPTION_HANDLER: every known error becomes a problem response."""
    if isinstance(exc, Replay):
        return exc.response
    if isinstance(exc, IntegrityError | DataError):
        exc = _from_database(exc)
    if isinstance(exc, OperationalError) and is_conflict(exc):  # a deadlock no retry was in a place to undo
        exc = busy(exc)
    if isinstance(exc, ServiceError):
        body = problem(exc.status, exc.title, exc.detail, exc.type, **exc.extra)
        if exc.errors:
            body["errors"] = exc.errors
        response = Response(body, status=exc.status)
        if isinstance(exc, Busy):
            response["Retry-After"] = "1"
    else:
        if isinstance(exc, Http404):
            exc = exceptions.NotFound("no such object, or it is not visible to you")
        elif isinstance(exc, DjangoPermissionDenied):
            exc = exceptions.PermissionDenied()
        if not isinstance(exc, exceptions.APIException):
            return None
        response = Response(_from_drf(exc), status=exc.status_code)
        if isinstance(exc, exceptions.NotAuthenticated | exceptions.AuthenticationFailed):
            response["WWW-Authenticate"] = 'Bearer realm="gpucloud"'
        if isinstance(exc, exceptions.Throttled):
            response["Retry-After"] = str(math.ceil(getattr(exc, "wait", None) or 1))
    request = context.get("request")
    if request is not None:
        response.data["instance"] = request.path
    response.content_type = PROBLEM_JSON
    return response


def json_problem(request: HttpRequest, status_code: int, title: str, detail: str, type_: str) -> JsonResponse:
    body = problem(status_code, title, detail, type_, instance=request.path)
    return JsonResponse(body, status=status_code, content_type=PROBLEM_JSON)


def bad_request(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """Django's 400 handler (requests Django itself refuses): a problem under /api/; a body over the limit
    is a 413 there."""
    if not request.path.startswith("/api/"):
        return defaults.bad_request(request, exception or Exception())
    if isinstance(exception, RequestDataTooBig):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        detail = f"the request body is larger than the limit of {limit} bytes"
        return json_problem(request, 413, "Request body too large", detail, "payload-too-large")
    return json_problem(
        request, 400, "The request is not valid", str(exception or "bad request"), "invalid-request"
    )


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """Django's 404 handler: a problem response under /api/, the usual page elsewhere."""
    if not request.path.startswith("/api/"):
        return defaults.page_not_found(request, exception or Http404())
    return json_problem(request, status.HTTP_404_NOT_FOUND, "Not found", "no such resource", "not-found")


def server_error(request: HttpRequest) -> HttpResponse:
    if not request.path.startswith("/api/"):
        return defaults.server_error(request)
    return json_problem(
        request, 500, "Internal error", "the server failed; the error was logged", "internal-error"
    )
