"""`/tenants/<slug>/queue/`: the tenant's pending workloads with position, reason and estimated start
(`clusters.queue`), and a feasibility check before submitting (`placement.queue_estimate`, priced by
`billing.services.quote` for roles that may see cost). Every role of the tenant; nothing is created."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from billing.services import quote
from clusters import queue
from fleet.models import GpuClass
from gpucloud.errors import ServiceError
from placement import queue_estimate
from portal.scoping import allowed, form_errors, tenant_for
from tenants.models import Quota


class FeasibilityForm(forms.Form):
    gpu_class = forms.ChoiceField(label="GPU class")
    count = forms.IntegerField(label="Units", min_value=1, max_value=queue_estimate.MAX_COUNT, initial=1)
    hours = forms.FloatField(label="Hours", min_value=0.01, max_value=queue_estimate.MAX_HOURS, initial=1)

    def __init__(self, *args: Any, classes: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["gpu_class"]
        assert isinstance(field, forms.ChoiceField)
        field.choices = [(c, c) for c in classes]


@login_required
def tenant_queue(request: HttpRequest, slug: str) -> HttpResponse:
    tenant = tenant_for(request, slug)
    quoted = (
        Quota.objects.filter(tenant=tenant)
        .values_list("gpu_class__name", flat=True)
        .order_by("gpu_class__name")
    )
    classes = list(quoted) or list(GpuClass.objects.order_by("name").values_list("name", flat=True))
    form = FeasibilityForm(request.GET if "gpu_class" in request.GET else None, classes=classes)
    answer, price = None, None
    if form.is_bound and form.is_valid():
        data = form.cleaned_data
        try:
            answer = queue_estimate.feasibility(
                tenant, data["gpu_class"], data["count"], data["hours"], ahead=queue.ahead(tenant)
            )
        except ServiceError as exc:
            form_errors(form, exc)
        if answer is not None and allowed(request, tenant, "billing.view")["billing_view"]:
            price = quote.quote(tenant, answer.gpu_class, answer.count, answer.hours)
    context = {
        "tenant": tenant,
        "tab": "queue",
        "entries": queue.tenant_queue(tenant),
        "form": form,
        "answer": answer,
        "price": price,
    }
    return render(request, "portal/tenant/queue.html", context)
