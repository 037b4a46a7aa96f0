"""`/users/`: local and single sign-on accounts; create, deactivate, reset a password, platform admin."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from gpucloud.errors import ServiceError
from portal.forms import UserForm
from portal.scoping import actor_of, form_errors
from portal.views.fleet import require_platform_admin
from tenants import selectors as tenant_selectors
from tenants import users
from tenants.services import platform_admins

User = get_user_model()
PER_PAGE = 50


@login_required
def user_list(request: HttpRequest) -> HttpResponse:
    require_platform_admin(request, "the users page")
    form = UserForm(request.POST or None)
    shown = None
    if request.method == "POST" and form.is_valid():
        try:
            user, secret = users.create_local_user(actor=actor_of(request), **form.cleaned_data)
        except ServiceError as error:
            form_errors(form, error)
        else:
            shown = (user, secret)
            form = UserForm()
    accounts = tenant_selectors.accounts()
    context = {
        "nav": "users",
        "form": form,
        "shown": shown,
        "page": Paginator(accounts, PER_PAGE).get_page(request.GET.get("page")),
    }
    return render(request, "portal/admin/users.html", context)


def _act(request: HttpRequest, user_id: int) -> HttpResponse:
    require_platform_admin(request, "the users page")
    user = get_object_or_404(User, pk=user_id)
    actor, action = actor_of(request), request.POST.get("action", "")
    try:
        if action == "reset":
            secret = users.reset_password(actor=actor, user=user)
            context = {"nav": "users", "reset": (user, secret)}
            return render(request, "portal/admin/password_reset.html", context)  # shown once, never stored
        if action in ("deactivate", "activate"):
            users.set_active(actor=actor, user=user, active=action == "activate")
        elif action in ("admin", "not-admin"):
            platform_admins.set_platform_admin(actor=actor, user=user, admin=action == "admin")
        messages.success(request, f"{user.get_username()}: done ({action}).")
    except ServiceError as error:
        messages.error(request, error.detail)
    return redirect("portal:users")


@login_required
@require_POST
def user_action(request: HttpRequest, user_id: int) -> HttpResponse:
    return _act(request, user_id)
