"""A guard in front of every view: no NUL character in the path, the query string or a header.

PostgreSQL refuses NUL (U+0000) in text, so a NUL that reached a lookup (`/invoices/%00/`, `?tenant=%00`)
failed as a 500 inside whatever query used it. Refusing it here covers every view, API and portal alike;
JSON bodies are checked by the API's parser (gpucloud.api.parsers).
"""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest

from gpucloud.api.problems import json_problem

NUL = "\x00"


class RefuseNulMiddleware:
    """Answers 400 (a problem under /api/) when the path, a query parameter or a header holds NUL."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        where = _where_nul(request)
        if where is None:
            return self.get_response(request)
        detail = f"NUL characters (%00, \\u0000) are not allowed in the {where}"
        if request.path.startswith("/api/"):
            return json_problem(request, 400, "The request is not valid", detail, "invalid-request")
        return HttpResponseBadRequest(detail, content_type="text/plain; charset=utf-8")


def _where_nul(request: HttpRequest) -> str | None:
    if NUL in request.path:
        return "path"
    if NUL in request.META.get("QUERY_STRING", "") or any(
        NUL in name or any(NUL in value for value in values) for name, values in request.GET.lists()
    ):
        return "query string"
    if any(NUL in str(value) for name, value in request.META.items() if name.startswith("HTTP_")):
        return "headers"
    return None
