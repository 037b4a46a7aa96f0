"""A service's refusal raised by a portal page becomes a page saying it, with the API's status code."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from gpucloud.errors import ServiceError
from gpucloud.transactions import busy, is_conflict


class ServiceErrorPage:
    """Pages outside /api/ that raise a ServiceError (403, 404, 409 …) answer with
    portal/templates/portal/error.html."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if is_conflict(exception):  # a deadlock no retry was in a place to undo: "try again", not a 500
            exception = busy(exception)
        if not isinstance(exception, ServiceError) or request.path.startswith("/api/"):
            return None
        context = {"title": exception.title, "detail": exception.detail}
        return render(request, "portal/error.html", context, status=exception.status)
