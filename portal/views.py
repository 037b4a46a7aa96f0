"""Server-rendered pages. They read through the same scoped selectors as the API and hold no logic."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render

from tenants.selectors import visible_tenants


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
        "members": tenant.memberships.select_related("user").order_by("user__username"),
    }
    return render(request, "portal/tenant_detail.html", context)
