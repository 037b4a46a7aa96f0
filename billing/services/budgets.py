"""Budgets: a monthly amount per tenant; each threshold the month's spend crosses raises one alert (audit row,
webhook, e-mail) and, where enforced, 100 % suspends the tenant.
"""

from __future__ import annotations

import logging
import re
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.mail import send_mail
from django.core.validators import validate_email
from django.db import transaction
from django.db.models import Sum
from django.utils import timezone

from billing import money, webhooks
from billing.models import (
    Budget,
    BudgetAlert,
    InvoiceLine,
    UsageHour,
)
from billing.services.invoicing import month_bounds, rate
from core import audit
from core.audit import Actor
from core.declared import refuse_undone_edit
from gpucloud.errors import ValidationFailed
from tenants.models import Tenant
from tenants.services.lifecycle import suspend_tenant
from tenants.services.roles import require

log = logging.getLogger(__name__)
THRESHOLDS = (50, 80, 100)
# The webhook URL is stored encrypted and never shown, so a caller editing the budget cannot send it back:
# `webhook_url=None` (the default) keeps the one stored; "" removes it; a URL replaces it.
KEEP_STORED_WEBHOOK: None = None


@transaction.atomic
def set_budget(
    *,
    actor: Actor,
    tenant: Tenant,
    monthly_amount: Any,
    currency: str = "USD",
    webhook_url: str | None = KEEP_STORED_WEBHOOK,
    email: str = "",
    enforce: bool = False,
) -> Budget:
    """Set the tenant's monthly budget. Owners and admins of the tenant, or platform administrators.

    `webhook_url` None keeps the stored webhook (none on a new budget), "" removes it, a URL replaces it.
    """
    require(actor, tenant, "budget.manage", "setting a budget")
    amount = money.BUDGET.parse(monthly_amount, "monthly_amount").quantize(money.BUDGET.places)  # exact
    currency = (currency or "").strip().upper()
    if not re.fullmatch(r"[A-Z]{3}", currency):
        raise ValidationFailed.on(
            "currency", f"the currency is three letters (ISO 4217, e.g. USD), not {currency!r}"
        )
    email = (email or "").strip()
    if email:
        try:
            validate_email(email)
        except DjangoValidationError:
            raise ValidationFailed.on("email", f"{email!r} is not an e-mail address") from None
    # A manifest's budget is these four (the webhook is a secret no manifest holds).
    wanted = {"monthly_amount": amount, "currency": currency, "email": email, "enforce": enforce}
    if Budget.objects.filter(tenant=tenant).values(*wanted).first() != wanted:
        refuse_undone_edit(actor, "Tenant", tenant.slug, ["budget"], f"setting the budget of {tenant.slug}")
    current = Budget.objects.filter(tenant=tenant).first()
    before = _snapshot(current) if current else None
    defaults: dict[str, Any] = {
        "monthly_amount": amount,
        "currency": currency,
        "email": email,
        "enforce": enforce,
    }
    if webhook_url is not KEEP_STORED_WEBHOOK:
        defaults["webhook_url_ciphertext"] = webhooks.seal(webhook_url)
    budget, _ = Budget.objects.update_or_create(tenant=tenant, defaults=defaults)
    audit.record(
        actor,
        "budget.set",
        object_type="budget",
        object_id=tenant.public_id,
        tenant=tenant,
        before=before,
        after=_snapshot(budget),
    )
    return budget


def _snapshot(budget: Budget) -> dict[str, Any]:
    """The budget as audited, the same fields before and after a change; of the webhook only its origin (the
    whole URL may hold a secret)."""
    return {
        "monthly_amount": str(budget.monthly_amount),
        "currency": budget.currency,
        "email": budget.email,
        "enforce": budget.enforce,
        "webhook": budget.webhook_origin,
    }


def spent_this_month(tenant: Tenant, now: datetime) -> Decimal:
    """What the tenant's usage of the current month costs so far, at the rate cards in force."""
    start, end = month_bounds(now.year, now.month)
    rows = (
        UsageHour.objects.filter(tenant=tenant, hour__gte=start, hour__lt=end)
        .values("gpu_class", "hour")
        .annotate(gpu_us=Sum("gpu_us"))
        .order_by("gpu_class", "hour")
    )
    sums = [(r["gpu_class"], r["hour"], r["gpu_us"]) for r in rows]
    return sum((line.amount for line in rate(tenant, sums, InvoiceLine.Kind.USAGE)), Decimal(0))


def check_budget(budget: Budget, now: datetime) -> list[BudgetAlert]:
    """Raise each threshold the month's spend has crossed, once per month: audit, webhook, e-mail, hold."""
    tenant = budget.tenant
    spent = spent_this_month(tenant, now)
    start, _ = month_bounds(now.year, now.month)
    alerts = []
    with transaction.atomic():
        for threshold in THRESHOLDS:
            if spent * 100 < budget.monthly_amount * threshold:
                break
            alert, created = BudgetAlert.objects.get_or_create(
                budget=budget, period_start=start, threshold=threshold, defaults={"spent": spent}
            )
            if created:
                alerts.append(alert)
                _raise_alert(budget, alert)
    return alerts


def _raise_alert(budget: Budget, alert: BudgetAlert) -> None:
    tenant = budget.tenant
    payload = {
        "tenant": tenant.slug,
        "threshold_percent": alert.threshold,
        "spent": str(alert.spent),
        "budget": str(budget.monthly_amount),
        "currency": budget.currency,
        "month": f"{alert.period_start:%Y-%m}",
    }
    audit.record(
        Actor.system("budgets"),
        "budget.threshold_crossed",
        object_type="budget",
        object_id=tenant.public_id,
        tenant=tenant,
        after=payload,
    )
    if budget.webhook_url:
        url = budget.webhook_url
        transaction.on_commit(lambda: webhooks.send(url, payload))
    if budget.email and settings.BILLING_ALERT_EMAIL_FROM:
        address = budget.email
        transaction.on_commit(lambda: _send_email(address, payload))
    if alert.threshold == 100 and budget.enforce and tenant.state == Tenant.State.READY:
        _hold_queues(tenant)


def _hold_queues(tenant: Tenant) -> None:
    """Enforcement: the tenant is suspended, which holds its queues (Kueue stopPolicy Hold)."""
    suspend_tenant(actor=Actor.console("budget-enforcement"), tenant=tenant)


def _send_email(address: str, payload: dict[str, Any]) -> None:
    subject = f"gpucloud: {payload['tenant']} reached {payload['threshold_percent']} % of its budget"
    body = (
        f"Tenant {payload['tenant']} has spent {payload['spent']} {payload['currency']} of its "
        f"{payload['budget']} {payload['currency']} budget for {payload['month']}."
    )
    try:
        send_mail(subject, body, settings.BILLING_ALERT_EMAIL_FROM, [address])
    except OSError as exc:
        log.warning("budget e-mail failed", extra={"to": address, "error": str(exc)})


def check_budgets(now: datetime | None = None) -> int:
    """Check every budget; returns how many alerts were raised."""
    now = now or timezone.now()
    budgets = Budget.objects.select_related("tenant").exclude(tenant__state=Tenant.State.DELETED)
    return sum(len(check_budget(b, now)) for b in budgets)
