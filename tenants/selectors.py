"""Reads that decide what a caller may see. Every tenant-owned query starts from `visible_tenants`."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from tenants.models import Tenant
from tenants.permissions import is_platform_admin, roles_with


def visible_tenants(user: Any, permission: str = "tenant.view") -> QuerySet[Tenant]:
    """Tenants in which the user holds `permission`: all for platform administrators, else by membership.

    With the default permission this is every tenant the user belongs to; anything else (another tenant)
    is "not found" to them.
    """
    if not user.is_authenticated or not user.is_active:
        return Tenant.objects.none()
    if is_platform_admin(user):
        return Tenant.objects.all()
    return Tenant.objects.filter(
        memberships__user=user, memberships__role__in=roles_with(permission)
    ).distinct()
