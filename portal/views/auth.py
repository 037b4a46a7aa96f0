"""Signing in with a password (single sign-on is portal/sso.py)."""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from core import audit
from portal import lockout
from tenants import invitations

log = logging.getLogger(__name__)


class LoginView(auth_views.LoginView):
    """The sign-in page: single sign-on when configured, passwords unless GPUCLOUD_LOCAL_LOGIN=false.

    Wrong passwords lock the account out from that address for a while (`portal/lockout.py`; the form answers
    429, without checking the password) and each is written to the audit log as `user.sign_in_failed`.
    """

    template_name = "portal/login.html"

    def _who(self) -> tuple[str, str]:
        return str(self.request.POST.get("username", "")), self.request.META.get("REMOTE_ADDR", "")

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        return {
            **super().get_context_data(**kwargs),
            "local_login": settings.LOCAL_LOGIN,
            "sso": bool(settings.OIDC_ISSUER),
        }

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not settings.LOCAL_LOGIN:
            return render(request, "portal/login.html", self.get_context_data(), status=403)
        if not lockout.attempt(*self._who()):  # counted now, before the password is checked
            log.warning("sign-in attempts for %r from %s are over the limit", *self._who())
            context = {**self.get_context_data(), "throttled": True}
            response = render(request, "portal/login.html", context, status=429)
            response["Retry-After"] = str(settings.LOGIN_ATTEMPTS_WINDOW)  # at most: the window may be older
            return response
        return super().post(request, *args, **kwargs)

    def form_valid(self, form: Any) -> HttpResponse:
        response = super().form_valid(form)
        lockout.succeeded(*self._who())
        audit.record_sign_in(form.get_user(), "password")
        invitations.accept(form.get_user())  # roles someone gave this person before their first sign-in
        return response

    def form_invalid(self, form: Any) -> HttpResponse:
        username, _ = self._who()  # the attempt was counted before the password was checked
        audit.record_sign_in_failure(
            username, "password", "the username and password do not match an active account"
        )
        return super().form_invalid(form)
