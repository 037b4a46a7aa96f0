"""Template helpers: whether the person holds a permission in a tenant (the services' own check), which
manifest source declares an object, and audited values as people read them."""

from __future__ import annotations

from typing import Any

from django import template

from core.audit import Actor
from core.declared import Declaration
from gitops import ownership
from tenants.services import roles

register = template.Library()


@register.simple_tag(takes_context=True)
def may(context: Any, tenant: Any, permission: str) -> bool:
    """`{% may tenant "audit.view" as can_audit %}`: the same answer the service would give."""
    return roles.can(Actor.of(context["request"].user), tenant, permission)


@register.simple_tag
def declared(kind: str, name: str) -> Declaration | None:
    """`{% declared "Tenant" tenant.slug as declaration %}`: its declaring source, as the services see it."""
    return ownership.declaration(kind, name)


@register.filter
def audit_value(value: Any) -> str:
    """An audited value as people read it: — for none, yes/no, lists joined, an empty text as “”."""
    if value is None or value == {} or value == []:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        return ", ".join(audit_value(v) for v in value)
    if value == "":
        return "“”"
    return str(value)
