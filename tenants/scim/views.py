"""SCIM 2.0 at /scim/v2/ (RFC 7643/7644): one Django view in front of scim2-server's handler.

Every request but `GET /ServiceProviderConfig` needs `Authorization: Bearer` with a SCIM token (scope
`scim`, made by a platform administrator); any other token, a tenant owner's or a platform
administrator's own, is refused. A request is one transaction: a deactivation and everything it cuts
commit together or not at all. Errors are SCIM errors (`application/scim+json`, `scimType`), never a page.
"""

from __future__ import annotations

import json
import logging
import re
from http import HTTPStatus
from typing import Any

from django.core.exceptions import RequestDataTooBig
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt
from scim2_models import (
    Context,
    ForbiddenException,
    InvalidValueException,
    NotFoundException,
    PayloadTooLargeException,
    Resource,
    ResponseParameters,
    SCIMException,
    UnauthorizedException,
    UniquenessException,
)
from scim2_server.handler import ScimHandler
from scim2_server.requests import ScimRequest
from scim2_server.responses import ScimResponse
from scim2_server.routing import Operation
from scim2_server.service import ScimService

from core.audit import Actor
from gpucloud.errors import Conflict, NotFound, PermissionDenied, ServiceError
from gpucloud.observability import current_context
from tenants import tokens
from tenants.models import ApiToken
from tenants.scim.storage import PROVIDER, Storage

log = logging.getLogger(__name__)
ROOT = "/scim/v2"
# A JSON-escaped NUL (an odd number of backslashes before u0000): PostgreSQL refuses NUL in text, so it is
# refused here, as gpucloud.api.middleware and the API's parser refuse it everywhere else.
ESCAPED_NUL = re.compile(rb"(?<!\\)(?:\\\\)*\\u0000", re.IGNORECASE)


class Service(ScimService):
    """scim2-server's protocol, answering a PATCH with the patched resource (200): Okta expects it, and
    RFC 7644 §3.5.2 allows it."""

    def patch_response(
        self, base_url: str, resource: Resource[Any], response_parameters: ResponseParameters[Any]
    ) -> ScimResponse:
        return self.resource_response(
            self.publish(base_url, resource), Context.RESOURCE_PATCH_RESPONSE, response_parameters
        )


SERVICE = Service(PROVIDER)


def authenticate(request: HttpRequest) -> Actor:
    """The identity provider whose SCIM token the request carries; anything else is refused."""
    scheme, _, text = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not text.strip():
        raise UnauthorizedException(
            detail="SCIM needs Authorization: Bearer <token>, with a SCIM token a platform administrator "
            "makes at POST /api/v1/scim/tokens/"
        )
    row, reason = tokens.check(text.strip())
    if row is None:
        raise UnauthorizedException(detail=reason)
    if row.scope != ApiToken.Scope.SCIM:
        raise ForbiddenException(
            detail="this token cannot use SCIM, whoever holds it: SCIM takes only a SCIM token, which a "
            "platform administrator makes at POST /api/v1/scim/tokens/"
        )
    if not row.user.is_active:
        raise UnauthorizedException(detail="the SCIM token's account is deactivated")
    tokens.touch(row, current_context().source_ip or request.META.get("REMOTE_ADDR", ""))
    return Actor.scim(row.user, row.name)


def _scim_error(error: ServiceError) -> SCIMException:
    """A refusal of the services, in SCIM's words (RFC 7644 §3.12)."""
    if isinstance(error, Conflict):
        return UniquenessException(detail=error.detail)
    if isinstance(error, PermissionDenied):
        return ForbiddenException(detail=error.detail)
    if isinstance(error, NotFound):
        return NotFoundException(detail=error.detail)
    return InvalidValueException(detail=error.detail)


def _needs_auth(scim_request: ScimRequest) -> bool:
    # The service provider configuration is public (RFC 7644 §4); an unknown path is answered only to a
    # caller who may know what exists.
    try:
        return SERVICE.match(scim_request).operation is not Operation.service_provider_config
    except SCIMException:
        return True


def serve(scim_request: ScimRequest, request: HttpRequest) -> ScimResponse:
    try:
        actor = authenticate(request) if _needs_auth(scim_request) else Actor.system("scim")
        if b"\x00" in scim_request.body or ESCAPED_NUL.search(scim_request.body):
            raise InvalidValueException(detail="NUL characters (\\u0000) are not allowed in a SCIM request")
        with transaction.atomic():
            return ScimHandler(SERVICE, Storage(actor)).handle(scim_request)
    except ServiceError as error:
        return SERVICE.error_response(_scim_error(error))
    except SCIMException as error:
        log.info("scim %s %s: %s %s", scim_request.method, scim_request.path, error.status, error)
        return SERVICE.error_response(error)
    except Exception as error:  # a bug: logged with its traceback, answered as a SCIM 500
        log.exception("scim %s %s failed", scim_request.method, scim_request.path)
        return SERVICE.error_response(error)


@csrf_exempt
def scim(request: HttpRequest, path: str = "") -> HttpResponse:
    """Every SCIM endpoint: ServiceProviderConfig, ResourceTypes, Schemas, Users, Groups."""
    base_url = request.build_absolute_uri(ROOT)
    try:
        body = request.body
    except RequestDataTooBig:
        scim_response = SERVICE.error_response(
            PayloadTooLargeException(detail="the request body is too large")
        )
    else:
        scim_request = ScimRequest(
            method=request.method or "GET",
            base_url=base_url,
            path="/" + path.removesuffix(".scim"),
            query={key: str(value) for key, value in request.GET.items()},
            headers=dict(request.headers.items()),
            body=body,
        )
        scim_response = serve(scim_request, request)
    return _django(scim_response)


def _django(scim_response: ScimResponse) -> HttpResponse:
    headers = dict(scim_response.headers)
    content_type = headers.pop("Content-Type")
    body = b"" if scim_response.body is None else json.dumps(scim_response.body).encode()
    response = HttpResponse(body, status=HTTPStatus(scim_response.status).value, content_type=content_type)
    for name, value in headers.items():
        response[name] = value
    response.setdefault("Cache-Control", "no-store")
    return response
