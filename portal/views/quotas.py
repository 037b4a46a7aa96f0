"""`/tenants/<slug>/quotas/`: each class's use against its guarantee and burst, and setting them."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from fleet.selectors import units_in_use
from gpucloud.errors import ServiceError
from portal.bars import bar
from portal.forms import QuotaForm, whole
from portal.scoping import actor_of, allowed, form_errors, tenant_for
from tenants.api.views import gpu_class_named
from tenants.capacity import capacity_table
from tenants.selectors import dedicated_nodes_of, quotas_of
from tenants.services.quotas import remove_quota, set_quota


@login_required
def quotas(request: HttpRequest, slug: str) -> HttpResponse:
    tenant = tenant_for(request, slug, "quota.view")
    can = allowed(request, tenant, "quota.manage")
    editing = request.GET.get("class", "")
    quota = quotas_of(tenant).filter(gpu_class__name=editing).first() if editing else None
    form = QuotaForm(request.POST or None, initial=QuotaForm.initial_of(quota, editing), tenant=tenant)
    if request.method == "POST" and form.is_valid() and _set(request, tenant, form):
        return redirect("portal:tenant-quotas", tenant.slug)
    used = units_in_use([tenant.pk])
    rows = [
        (q, bar(used.get((tenant.pk, q.gpu_class.name), 0), q.guaranteed, q.burst)) for q in quotas_of(tenant)
    ]
    context = {
        "tenant": tenant,
        "tab": "quotas",
        "rows": rows,
        "form": form,
        "editing": quota,
        "can": can,
        # What the host cluster could still guarantee, per class: the numbers a refusal would name.
        "capacity": capacity_table(tenant.cluster.host_cluster) if can["quota_manage"] else [],
        # An isolated tenant's whole nodes (docs/kubernetes.md, "Dedicated nodes").
        "dedicated": dedicated_nodes_of(tenant),
    }
    return render(request, "portal/tenant/quotas.html", context)


def _set(request: HttpRequest, tenant: object, form: QuotaForm) -> bool:
    data = form.cleaned_data
    try:
        quota, created = set_quota(
            actor=actor_of(request),
            tenant=tenant,  # type: ignore[arg-type]
            gpu_class=gpu_class_named(data["gpu_class"]),
            guaranteed=whole(data["guaranteed"]),
            burst=whole(data["burst"]),
            lendable=whole(data["lendable"], None),
            weight=whole(data["weight"], 1),
        )
    except ServiceError as error:
        form_errors(form, error)
        return False
    messages.success(request, f"Quota of {quota.gpu_class.name} {'set' if created else 'changed'}.")
    return True


@login_required
@require_POST
def quota_remove(request: HttpRequest, slug: str, gpu_class: str) -> HttpResponse:
    tenant = tenant_for(request, slug, "quota.view")
    quota = get_object_or_404(quotas_of(tenant), gpu_class__name=gpu_class)
    try:
        remove_quota(actor=actor_of(request), quota=quota)
    except ServiceError as error:
        messages.error(request, error.detail)
    else:
        messages.success(request, f"Quota of {gpu_class} removed; its guarantee returns to the pool.")
    return redirect("portal:tenant-quotas", tenant.slug)
