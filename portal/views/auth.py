"""Signing in with a password (single sign-on is portal/sso.py)."""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from tenants import audit

log = logging.getLogger(__name__)


class LoginView(auth_views.LoginView):
    """The sign-in page: single sign-on when configured, passwords unless GPUCLOUD_LOCAL_LOGIN=false.

    Failed password attempts are counted per source address in the cache; past GPUCLOUD_LOGIN_ATTEMPTS in
    GPUCLOUD_LOGIN_ATTEMPTS_WINDOW seconds the form answers 429 until the window passes.
    """

    template_name = "portal/login.html"

    def _key(self) -> str:
        return "login-failures:" + self.request.META.get("REMOTE_ADDR", "")

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        return {
            **super().get_context_data(**kwargs),
            "local_login": settings.LOCAL_LOGIN,
            "sso": bool(settings.OIDC_ISSUER),
        }

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not settings.LOCAL_LOGIN:
            return render(request, "portal/login.html", self.get_context_data(), status=403)
        if cache.get(self._key(), 0) >= settings.LOGIN_ATTEMPTS:
            log.warning("sign-in attempts from %s are over the limit", request.META.get("REMOTE_ADDR"))
            context = {**self.get_context_data(), "throttled": True}
            return render(request, "portal/login.html", context, status=429)
        return super().post(request, *args, **kwargs)

    def form_valid(self, form: Any) -> HttpResponse:
        response = super().form_valid(form)
        audit.record_sign_in(form.get_user(), "password")
        return response

    def form_invalid(self, form: Any) -> HttpResponse:
        key = self._key()
        cache.add(key, 0, timeout=settings.LOGIN_ATTEMPTS_WINDOW)
        cache.incr(key)
        return super().form_invalid(form)
