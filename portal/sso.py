"""The sign-in pages of single sign-on: they start and finish mozilla-django-oidc's authorization-code flow
and turn every way it can fail into a page that says what happened, never a 500."""

from __future__ import annotations

import logging
from typing import Any

import requests
from django.conf import settings
from django.contrib.auth import logout
from django.core.exceptions import SuspiciousOperation
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from mozilla_django_oidc import views as oidc_views

from core import audit
from tenants import sso

log = logging.getLogger(__name__)

# (1) mozilla-django-oidc ships no type information: its views are Any to mypy, and so is what they return.


def sign_in_error(request: HttpRequest, title: str, detail: str, status: int) -> HttpResponse:
    return render(request, "portal/sso_error.html", {"title": title, "detail": detail}, status=status)


def provider_down(request: HttpRequest, exc: Exception) -> HttpResponse:
    log.error("single sign-on failed: the identity provider cannot be used: %s", exc)
    return sign_in_error(
        request,
        "The identity provider cannot be reached",
        "Signing in through your company account is not possible right now. Try again in a few minutes; "
        "if it persists, tell your gpucloud administrator (the cause is in the server log).",
        503,
    )


class Start(oidc_views.OIDCAuthenticationRequestView):  # type: ignore[misc]  # (1)
    """GET /oidc/authenticate/: keep state, nonce and PKCE verifier; send the browser to the provider."""

    get_settings = staticmethod(sso.setting)

    def __init__(self, **kwargs: Any) -> None:
        # Skip the parent's __init__: it reads the authorization endpoint, which needs discovery, and a
        # provider that is down must give the error page below rather than fail building the view.
        super(oidc_views.OIDCAuthenticationRequestView, self).__init__(**kwargs)
        self.OIDC_RP_CLIENT_ID = sso.setting("OIDC_RP_CLIENT_ID")

    def get(self, request: HttpRequest) -> HttpResponse:
        try:
            self.OIDC_OP_AUTH_ENDPOINT = sso.setting("OIDC_OP_AUTHORIZATION_ENDPOINT")
        except sso.ProviderUnavailable as exc:
            return provider_down(request, exc)
        response: HttpResponse = super().get(request)
        return response


class Callback(oidc_views.OIDCAuthenticationCallbackView):  # type: ignore[misc]  # (1)
    """GET /oidc/callback/: the provider sends the browser back here with a code (or an error)."""

    get_settings = staticmethod(sso.setting)

    def get(self, request: HttpRequest) -> HttpResponse:
        if "state" in request.GET and "oidc_states" not in request.session:
            log.warning("sso callback without a sign-in in progress (expired or foreign session)")
            return sign_in_error(
                request,
                "Your sign-in session expired",
                "The sign-in took too long or was started in another browser. Start again from the "
                "sign-in page.",
                400,
            )
        try:
            response: HttpResponse = super().get(request)
        except sso.ProviderUnavailable as exc:
            return provider_down(request, exc)
        except requests.RequestException as exc:
            return provider_down(request, exc)
        except SuspiciousOperation as exc:
            log.warning("sso callback refused: %s", exc)
            audit.record_sign_in_failure(
                getattr(request, "sso_username", ""), "sso", f"the provider's answer was refused: {exc}"
            )
            return sign_in_error(
                request,
                "This sign-in could not be verified",
                "The answer from the identity provider did not match the sign-in this browser started "
                "(its state was unknown or altered). Start again from the sign-in page.",
                400,
            )
        return response

    def login_failure(self) -> HttpResponse:
        request = self.request
        who = getattr(request, "sso_username", "")
        reason = getattr(request, "sso_refusal", "")
        if reason:
            log.warning("sso sign-in refused: %s", reason)
            audit.record_sign_in_failure(who, "sso", reason)
            return sign_in_error(request, "You have no access to gpucloud", reason, 403)
        error = request.GET.get("error", "")
        log.warning("sso sign-in failed: %s", error or "the provider's answer was not accepted")
        audit.record_sign_in_failure(
            who,
            "sso",
            f"the provider answered: {error}" if error else "the provider's answer was not accepted",
        )
        detail = (
            f"The identity provider answered: {request.GET.get('error_description') or error}."
            if error
            else "The identity provider's answer was not accepted, or the account is deactivated."
        )
        return sign_in_error(request, "Signing in did not work", detail + " Start again.", 400)

    def login_success(self) -> HttpResponse:
        response: HttpResponse = super().login_success()
        audit.record_sign_in(self.user, "sso")
        return response


class Logout(oidc_views.OIDCLogoutView):  # type: ignore[misc]  # (1)
    """POST /logout/: end the gpucloud session, and for a provider's user the provider's session too."""

    get_settings = staticmethod(sso.setting)

    def post(self, request: HttpRequest) -> HttpResponse:
        user = request.user
        if user.is_authenticated and user.identities.exists():
            response: HttpResponse = super().post(request)
            return response
        logout(request)  # a local account has no provider session to end
        return redirect(settings.LOGOUT_REDIRECT_URL)
