"""A tenant's invoices, an invoice's page (lines, adjustments, downloads), the budget and its alerts."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from billing import exports
from billing.models import Budget, Invoice
from billing.selectors import budget_of, invoices_of
from billing.services import budgets, invoicing
from billing.services.budgets import spent_this_month
from gpucloud.errors import ServiceError
from portal.forms import BudgetForm
from portal.scoping import actor_of, allowed, form_errors, tenant_for
from tenants.models import Tenant

PER_PAGE = 24


@login_required
def invoices(request: HttpRequest, slug: str) -> HttpResponse:
    tenant = tenant_for(request, slug, "billing.view")
    budget = budget_of(tenant)
    can = allowed(request, tenant, "budget.manage")
    form = _budget_form(request, budget)
    if request.method == "POST" and form.is_valid() and _set_budget(request, tenant, form):
        return redirect("portal:tenant-invoices", tenant.slug)
    context = {
        "tenant": tenant,
        "tab": "invoices",
        "page": Paginator(invoices_of(tenant), PER_PAGE).get_page(request.GET.get("page")),
        "budget": budget,
        "alerts": list(budget.alerts.all()[:12]) if budget else [],
        "spent": spent_this_month(tenant, timezone.now()),
        "month": timezone.now().strftime("%Y-%m"),
        "form": form,
        "can": can,
    }
    return render(request, "portal/tenant/invoices.html", context)


def _budget_form(request: HttpRequest, budget: Budget | None) -> BudgetForm:
    initial = (
        {"monthly_amount": budget.monthly_amount, "currency": budget.currency}
        | {"email": budget.email, "enforce": budget.enforce}
        if budget
        else {}
    )
    origin = budget.webhook_origin if budget else ""
    return BudgetForm(request.POST or None, initial=initial, webhook_origin=origin)


def _set_budget(request: HttpRequest, tenant: Tenant, form: BudgetForm) -> bool:
    """As POST /api/v1/budgets/ does; a webhook left empty stays as it was (it is never shown)."""
    data = form.cleaned_data
    try:
        budget = budgets.set_budget(
            actor=actor_of(request),
            tenant=tenant,
            monthly_amount=data["monthly_amount"].strip(),
            currency=data["currency"] or "USD",
            webhook_url=form.webhook(),
            email=data["email"],
            enforce=data["enforce"],
        )
    except ServiceError as error:
        form_errors(form, error)
        return False
    messages.success(request, f"Budget set: {budget.monthly_amount} {budget.currency} a month.")
    return True


@login_required
@require_POST
def draft(request: HttpRequest, slug: str) -> HttpResponse:
    """Compute (or recompute) this month's draft from the ledger, as POST /api/v1/invoices/ does."""
    tenant = tenant_for(request, slug, "billing.view")
    now = timezone.now()
    try:
        invoice = invoicing.draft_invoice(
            actor=actor_of(request), tenant=tenant, year=now.year, month=now.month
        )
    except ServiceError as error:
        messages.error(request, error.detail)
        return redirect("portal:tenant-invoices", tenant.slug)
    return redirect("portal:tenant-invoice", tenant.slug, invoice.public_id)


@login_required
def invoice(request: HttpRequest, slug: str, invoice_id: str) -> HttpResponse:
    tenant = tenant_for(request, slug, "billing.view")
    row = get_object_or_404(invoices_of(tenant).prefetch_related("lines"), public_id=invoice_id)
    lines = sorted(row.lines.all(), key=lambda line: (line.kind, line.gpu_class, line.charge_start))
    context = {
        "tenant": tenant,
        "tab": "invoices",
        "invoice": row,
        "usage": [line for line in lines if line.kind == "usage"],
        "adjustments": [line for line in lines if line.kind != "usage"],
        "can": allowed(request, tenant, "invoice.download"),
        "platform_admin": actor_of(request).is_platform_admin,
    }
    return render(request, "portal/tenant/invoice.html", context)


@login_required
def download(request: HttpRequest, slug: str, invoice_id: str, what: str) -> HttpResponse:
    """The invoice as CSV or FOCUS, exported and audited as the API's download is."""
    tenant = tenant_for(request, slug, "invoice.download")
    if what not in ("csv", "focus"):
        raise Http404("invoices download as csv or focus")
    row = get_object_or_404(invoices_of(tenant).prefetch_related("lines"), public_id=invoice_id)
    invoicing.record_export(actor=actor_of(request), tenant=tenant, what=what, object_id=row.public_id)
    text = exports.invoices_csv([row]) if what == "csv" else exports.invoices_focus([row])
    response = HttpResponse(text, content_type="text/csv")
    response["Content-Disposition"] = f'attachment; filename="{row.public_id}-{what}.csv"'
    return response


@login_required
@require_POST
def issue(request: HttpRequest, slug: str, invoice_id: str) -> HttpResponse:
    tenant = tenant_for(request, slug, "billing.view")
    row = get_object_or_404(Invoice, tenant=tenant, public_id=invoice_id)
    try:
        invoicing.issue_invoice(actor=actor_of(request), invoice=row)
    except ServiceError as error:
        messages.error(request, error.detail)
    else:
        messages.success(request, f"Invoice {row.public_id} issued; it will not change again.")
    return redirect("portal:tenant-invoice", tenant.slug, row.public_id)
