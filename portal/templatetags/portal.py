"""Template helpers: whether the person holds a permission in a tenant (the services' own check)."""

from __future__ import annotations

from typing import Any

from django import template

from tenants import services
from tenants.audit import Actor

register = template.Library()


@register.simple_tag(takes_context=True)
def may(context: Any, tenant: Any, permission: str) -> bool:
    """`{% may tenant "audit.view" as can_audit %}`: the same answer the service would give."""
    return services.can(Actor.of(context["request"].user), tenant, permission)
