"""Server-rendered pages. They read through the same scoped selectors as the API and hold no logic."""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render

from portal import lockout
from tenants import audit
from tenants.selectors import visible_tenants

log = logging.getLogger(__name__)


class LoginView(auth_views.LoginView):
    """The sign-in page: single sign-on when configured, passwords unless GPUCLOUD_LOCAL_LOGIN=false.

    Wrong passwords lock the account out from that address for a while (`portal/lockout.py`; the form answers
    429) and each is written to the audit log as `user.sign_in_failed`.
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
        if lockout.locked(*self._who()):
            log.warning("sign-in attempts for %r from %s are over the limit", *self._who())
            context = {**self.get_context_data(), "throttled": True}
            response = render(request, "portal/login.html", context, status=429)
            response["Retry-After"] = str(settings.LOGIN_ATTEMPTS_WINDOW)  # at most: the window may be older
            return response
        return super().post(request, *args, **kwargs)

    def form_valid(self, form: Any) -> HttpResponse:
        response = super().form_valid(form)
        lockout.forget_failures(*self._who())
        audit.record_sign_in(form.get_user(), "password")
        return response

    def form_invalid(self, form: Any) -> HttpResponse:
        username, address = self._who()
        lockout.count_failure(username, address)
        audit.record_sign_in_failure(
            username, "password", "the username and password do not match an active account"
        )
        return super().form_invalid(form)


@login_required
def tenant_list(request: HttpRequest) -> HttpResponse:
    tenants = visible_tenants(request.user).select_related("cluster__host_cluster").order_by("slug")
    return render(request, "portal/tenant_list.html", {"tenants": tenants})


@login_required
def tenant_detail(request: HttpRequest, slug: str) -> HttpResponse:
    tenant = get_object_or_404(
        visible_tenants(request.user).select_related("cluster__host_cluster"), slug=slug
    )
    context = {
        "tenant": tenant,
        "quotas": tenant.quotas.select_related("gpu_class").order_by("gpu_class__name"),
        "members": (
            tenant.memberships.select_related("user").order_by("user__username")
            if visible_tenants(request.user, "member.view").filter(pk=tenant.pk).exists()
            else None
        ),
    }
    return render(request, "portal/tenant_detail.html", context)
