"""The portal's one way to reach a tenant: the API's scope (`visible_tenants`) and permission matrix.

Another tenant is "not found"; a tenant the person belongs to without the permission a page needs is
"forbidden" with the roles that would allow it, word for word as the API says it (`tenants.selectors`).
"""

from __future__ import annotations

import re
from typing import Any

from django.http import HttpRequest

from core.audit import Actor
from gpucloud.errors import ServiceError
from tenants import selectors
from tenants.models import Tenant
from tenants.services import roles


def actor_of(request: HttpRequest) -> Actor:
    return Actor.of(request.user)


def tenant_for(request: HttpRequest, slug: str, permission: str = "tenant.view") -> Tenant:
    """The tenant `slug` if the person may see it (else 404) and holds `permission` there (else 403 naming
    the roles): `tenants.selectors.tenant_for`, the API's rule and words."""
    return selectors.tenant_for(request.user, slug, permission, "cluster__host_cluster")


def allowed(request: HttpRequest, tenant: Tenant, *permissions: str) -> dict[str, bool]:
    """Which of `permissions` the person holds in the tenant, for templates: {"quota_manage": True, …}."""
    actor = actor_of(request)
    return {p.replace(".", "_"): roles.can(actor, tenant, p) for p in permissions}


def form_errors(form: Any, error: ServiceError) -> None:
    """Put a service's refusal on the form: each field's messages next to that field, the rest on top."""
    placed = False
    for field, messages in error.errors.items():
        # "quotas[0].gpu_class" is shown by gpu_class, "prices.h100-80gb" by prices
        name = next(
            (n for n in (field, field.rsplit(".", 1)[-1], re.split(r"[.\[]", field)[0]) if n in form.fields),
            "",
        )
        if name in form.fields:
            for message in messages:
                form.add_error(name, message)
            placed = True
    if not placed or all(error.detail not in messages for messages in error.errors.values()):
        form.add_error(None, error.detail)
