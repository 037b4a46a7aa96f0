"""Reads that decide what a caller may see. Every tenant-owned query starts from `visible_tenants`."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from tenants.models import Tenant


def visible_tenants(user: Any) -> QuerySet[Tenant]:
    """Tenants the user may see: all for platform administrators, else those they are a member of."""
    if not user.is_authenticated:
        return Tenant.objects.none()
    if user.is_staff:
        return Tenant.objects.all()
    return Tenant.objects.filter(memberships__user=user)
