"""`/tenants/<slug>/members/`: who has which role, adding people and changing roles, by the API's rules."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from gpucloud.errors import ServiceError
from portal.forms import MemberForm, RoleForm
from portal.scoping import actor_of, allowed, form_errors, tenant_for
from tenants import invitations
from tenants.models import Invitation, Membership, Tenant
from tenants.selectors import members_of, pending_invitations
from tenants.services.members import add_member, remove_member

PER_PAGE = 50


@login_required
def members(request: HttpRequest, slug: str) -> HttpResponse:
    tenant = tenant_for(request, slug, "member.view")
    form = MemberForm(request.POST or None)
    if request.method == "POST" and form.is_valid() and _add(request, tenant, form):
        return redirect("portal:tenant-members", tenant.slug)
    people = members_of(tenant)
    context = {
        "tenant": tenant,
        "tab": "members",
        "form": form,
        "page": Paginator(people, PER_PAGE).get_page(request.GET.get("page")),
        "roles": Membership.Role.choices,
        "invited": pending_invitations(tenant),
        "can": allowed(request, tenant, "member.manage"),
    }
    return render(request, "portal/tenant/members.html", context)


def _add(request: HttpRequest, tenant: Tenant, form: MemberForm) -> bool:
    try:
        row = invitations.invite(
            actor=actor_of(request),
            tenant=tenant,
            login=form.cleaned_data["username"],
            role=form.cleaned_data["role"],
        )
    except ServiceError as error:
        form_errors(form, error)
        return False
    if isinstance(row, Invitation):
        messages.success(
            request, f"{row.login} is invited as {row.role}: the role is theirs at their first sign-in."
        )
    else:
        messages.success(request, f"{row.user.get_username()} is now {row.role} of {tenant.slug}.")
    return True


@login_required
@require_POST
def invitation_cancel(request: HttpRequest, slug: str, invitation_id: int) -> HttpResponse:
    tenant = tenant_for(request, slug, "member.view")
    row = get_object_or_404(pending_invitations(tenant), pk=invitation_id)
    try:
        invitations.cancel(actor=actor_of(request), invitation=row)
    except ServiceError as error:
        messages.error(request, error.detail)
    else:
        messages.success(request, f"The invitation of {row.login} is withdrawn.")
    return redirect("portal:tenant-members", tenant.slug)


@login_required
@require_POST
def member_role(request: HttpRequest, slug: str, username: str) -> HttpResponse:
    tenant = tenant_for(request, slug, "member.view")
    membership = get_object_or_404(members_of(tenant), user__username=username)
    form = RoleForm(request.POST)
    try:
        add_member(
            actor=actor_of(request),
            tenant=tenant,
            username=membership.user.get_username(),
            role=form.data.get("role", ""),
        )
    except ServiceError as error:
        messages.error(request, error.detail)
    else:
        messages.success(request, f"{username} is now {form.data.get('role')}.")
    return redirect("portal:tenant-members", tenant.slug)


@login_required
@require_POST
def member_remove(request: HttpRequest, slug: str, username: str) -> HttpResponse:
    tenant = tenant_for(request, slug, "member.view")
    membership = get_object_or_404(members_of(tenant), user__username=username)
    try:
        remove_member(actor=actor_of(request), tenant=tenant, membership=membership)
    except ServiceError as error:
        messages.error(request, error.detail)
    else:
        messages.success(request, f"{username} no longer has a role in {tenant.slug}.")
    return redirect("portal:tenant-members", tenant.slug)
