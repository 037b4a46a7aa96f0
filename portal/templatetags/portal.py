"""Template helpers: whether the person holds a permission in a tenant (the services' own check), and which
manifest source declares an object."""

from __future__ import annotations

from typing import Any

from django import template

from gitops import ownership
from tenants import services
from tenants.audit import Actor
from tenants.declared import Declaration

register = template.Library()


@register.simple_tag(takes_context=True)
def may(context: Any, tenant: Any, permission: str) -> bool:
    """`{% may tenant "audit.view" as can_audit %}`: the same answer the service would give."""
    return services.can(Actor.of(context["request"].user), tenant, permission)


@register.simple_tag
def declared(kind: str, name: str) -> Declaration | None:
    """`{% declared "Tenant" tenant.slug as declaration %}`: its declaring source, as the services see it."""
    return ownership.declaration(kind, name)
