"""Service tokens (`/tenants/<slug>/tokens/`) and personal (`/account/tokens/`): make, show once, revoke."""

from __future__ import annotations

from datetime import UTC, datetime, time
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from gpucloud.errors import ServiceError
from portal.forms import TokenForm
from portal.scoping import actor_of, form_errors, tenant_for
from tenants import selectors, tokens
from tenants.models import ApiToken, Tenant


def _create(request: HttpRequest, form: TokenForm, tenant: Tenant | None) -> tuple[ApiToken, str] | None:
    data = form.cleaned_data
    expires = data["expires_at"]
    values: dict[str, Any] = {
        "actor": actor_of(request),
        "name": data["name"],
        "scope": data["scope"],
        "expires_at": datetime.combine(expires, time(), UTC) if expires else None,
    }
    try:
        if tenant is None:
            return tokens.create_token(user=request.user, **values)  # type: ignore[arg-type]
        return tokens.create_service_token(tenant=tenant, **values)
    except ServiceError as error:
        form_errors(form, error)
        return None


def _page(request: HttpRequest, tenant: Tenant | None, rows: Any, template: str) -> HttpResponse:
    """The list and the form; after a create, the same page showing the new token's text once.

    The text is rendered into this response only (never a redirect, a session or a message), so it cannot
    be shown again.
    """
    form = TokenForm(request.POST or None)
    created = None
    if request.method == "POST" and form.is_valid():
        created = _create(request, form, tenant)
        if created is not None:
            form = TokenForm()
    context = {
        "tenant": tenant,
        "tab": "tokens",
        "nav": "tokens" if tenant is None else "",
        "form": form,
        "rows": rows,
        "created": created,
    }
    return render(request, template, context)


@login_required
def service_tokens(request: HttpRequest, slug: str) -> HttpResponse:
    tenant = tenant_for(request, slug, "token.manage")
    return _page(request, tenant, selectors.service_tokens(tenant), "portal/tenant/tokens.html")


@login_required
def personal_tokens(request: HttpRequest) -> HttpResponse:
    return _page(request, None, selectors.personal_tokens(request.user), "portal/account_tokens.html")


@login_required
@require_POST
def revoke(request: HttpRequest, token_id: str) -> HttpResponse:
    """Revoke a token the person may see here: one of theirs, or a service token of a tenant they manage."""
    token = selectors.token_with_id(token_id)
    if token is None:
        raise Http404("no such token")
    if token.tenant is not None:
        tenant_for(request, token.tenant.slug, "token.manage")  # 404 for another tenant's token
    elif token.user_id != request.user.pk:
        raise Http404("no such token")
    try:
        tokens.revoke_token(actor=actor_of(request), token=token)
    except ServiceError as error:
        messages.error(request, error.detail)
    else:
        messages.success(request, f"Token {token.name} ({token.prefix}…) revoked: it stopped working now.")
    if token.tenant is not None:
        return redirect("portal:tenant-tokens", token.tenant.slug)
    return redirect("portal:account-tokens")
