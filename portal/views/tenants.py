"""A tenant's own pages: create, overview with live cluster status and Connect, the lifecycle buttons."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from clusters.access.kubeconfigs import admin_kubeconfig, tenant_kubeconfig
from fleet.models import host_cluster_named
from gpucloud.errors import ServiceError
from portal.forms import TenantForm, whole
from portal.scoping import actor_of, allowed, form_errors, tenant_for
from tenants.api.views import gpu_class_named
from tenants.models import Tenant
from tenants.services import lifecycle, quotas, roles, sleep

# Cluster states that are on their way somewhere: the status panel polls while the cluster is in one.
MOVING: set[str] = {Tenant.State.PENDING, Tenant.State.PROVISIONING, Tenant.State.DELETING}
PROVISION: list[str] = [Tenant.State.PENDING, Tenant.State.PROVISIONING, Tenant.State.READY]
REMOVAL: list[str] = [Tenant.State.READY, Tenant.State.DELETING, Tenant.State.DELETED]


@login_required
def tenant_create(request: HttpRequest) -> HttpResponse:
    roles.require_tenant_creator(actor_of(request))  # before the form: nobody fills it in to be refused
    form = TenantForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            tenant = _create(request, form.cleaned_data)
        except ServiceError as error:
            form_errors(form, error)
        else:
            messages.success(request, f"Tenant {tenant.slug} is being provisioned; this page follows it.")
            return redirect("portal:tenant-detail", tenant.slug)
    return render(request, "portal/tenant_create.html", {"form": form, "nav": "tenant-create"})


@transaction.atomic
def _create(request: HttpRequest, data: dict[str, Any]) -> Tenant:
    """The tenant and its first quota in one transaction: a refused quota creates no tenant."""
    actor = actor_of(request)
    tenant = lifecycle.create_tenant(
        actor=actor,
        slug=data["slug"].strip(),
        display_name=data["display_name"].strip(),
        trust_tier=data["trust_tier"],
        host_cluster=host_cluster_named(data["host_cluster"]),
    )
    if data["gpu_class"]:
        quotas.set_quota(
            actor=actor,
            tenant=tenant,
            gpu_class=gpu_class_named(data["gpu_class"]),
            guaranteed=whole(data["guaranteed"]),
            burst=whole(data["burst"]),
        )
    return tenant


def steps(tenant: Tenant) -> list[tuple[str, str]]:
    """The lifecycle the cluster is going through, each step done, current, failed or to come."""
    state = tenant.cluster.state
    if tenant.state == Tenant.State.SUSPENDED or state == Tenant.State.SUSPENDED:
        path: list[str] = [Tenant.State.READY, Tenant.State.SUSPENDED]
    elif tenant.state in (Tenant.State.DELETING, Tenant.State.DELETED):
        path = REMOVAL
    else:
        path = PROVISION
    current = path.index(state) if state in path else 0
    result: list[tuple[str, str]] = []
    for i, step in enumerate(path):
        if state == Tenant.State.FAILED and i == current:
            result.append((Tenant.State.FAILED, "failed"))
        else:
            result.append((step, "done" if i < current else "current" if i == current else "todo"))
    return result


def _live(request: HttpRequest, tenant: Tenant) -> dict[str, Any]:
    return {
        "tenant": tenant,
        "steps": steps(tenant),
        # Also while the cluster has not caught up with the tenant yet (suspending, resuming).
        "moving": bool({tenant.cluster.state, tenant.state} & MOVING) or tenant.cluster.state != tenant.state,
        "connectable": tenant.cluster.state in (Tenant.State.READY, Tenant.State.SUSPENDED),
        "can": allowed(
            request,
            tenant,
            "kubeconfig.download",
            "kubeconfig.admin",
            "tenant.suspend",
            "tenant.delete",
            "tenant.update",
            "tenant.wake",
        ),
    }


@login_required
def tenant_detail(request: HttpRequest, slug: str) -> HttpResponse:
    tenant = tenant_for(request, slug)
    return render(request, "portal/tenant/overview.html", {**_live(request, tenant), "tab": "overview"})


@login_required
def tenant_status(request: HttpRequest, slug: str) -> HttpResponse:
    """The live part of the overview, polled by htmx while the cluster is provisioned or deleted."""
    tenant = tenant_for(request, slug)
    return render(request, "portal/partials/cluster_status.html", _live(request, tenant))


@login_required
def kubeconfig(request: HttpRequest, slug: str) -> HttpResponse:
    tenant = tenant_for(request, slug)
    text = tenant_kubeconfig(actor=actor_of(request), tenant=tenant)  # audited by the service
    response = HttpResponse(text, content_type="application/yaml")
    response["Content-Disposition"] = f'attachment; filename="{tenant.slug}-kubeconfig.yaml"'
    return response


@login_required
def admin_kubeconfig_download(request: HttpRequest, slug: str) -> HttpResponse:
    """Break-glass: the vCluster's own admin kubeconfig (owners only; audited by the service)."""
    tenant = tenant_for(request, slug)
    text = admin_kubeconfig(actor=actor_of(request), tenant=tenant)
    response = HttpResponse(text, content_type="application/yaml")
    response["Content-Disposition"] = f'attachment; filename="{tenant.slug}-admin-kubeconfig.yaml"'
    return response


def _lifecycle(request: HttpRequest, slug: str, service: Any, done: str) -> HttpResponse:
    tenant = tenant_for(request, slug)
    try:
        service(actor=actor_of(request), tenant=tenant)
    except ServiceError as error:
        messages.error(request, error.detail)
    else:
        messages.success(request, done.format(slug=tenant.slug))
    return redirect("portal:tenant-detail", tenant.slug)


@login_required
@require_POST
def tenant_suspend(request: HttpRequest, slug: str) -> HttpResponse:
    return _lifecycle(request, slug, lifecycle.suspend_tenant, "Suspending {slug}: its workloads stop.")


@login_required
@require_POST
def tenant_resume(request: HttpRequest, slug: str) -> HttpResponse:
    return _lifecycle(request, slug, lifecycle.resume_tenant, "Resuming {slug}.")


@login_required
@require_POST
def tenant_wake(request: HttpRequest, slug: str) -> HttpResponse:
    return _lifecycle(request, slug, sleep.wake_tenant, "Waking {slug}: its quota comes back to it.")


@login_required
@require_POST
def tenant_sleep_settings(request: HttpRequest, slug: str) -> HttpResponse:
    tenant = tenant_for(request, slug)
    try:
        sleep.set_sleep_settings(
            actor=actor_of(request),
            tenant=tenant,
            sleep_after_inactivity=request.POST.get("sleep_after_inactivity", ""),
            sleep_when_idle=request.POST.get("sleep_when_idle") == "on",
        )
    except ServiceError as error:
        messages.error(request, error.detail)
    else:
        messages.success(request, f"The sleep settings of {tenant.slug} are saved.")
    return redirect("portal:tenant-detail", tenant.slug)


@login_required
@require_POST
def tenant_delete(request: HttpRequest, slug: str) -> HttpResponse:
    tenant = tenant_for(request, slug)
    if request.POST.get("confirm", "").strip() != tenant.slug:
        messages.error(
            request, f"Nothing was deleted: type {tenant.slug} in the box to confirm the deletion."
        )
        return redirect("portal:tenant-detail", tenant.slug)
    return _lifecycle(
        request, slug, lifecycle.delete_tenant, "Deleting {slug}: its cluster is being removed."
    )
