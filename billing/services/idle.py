"""Idle tenant clusters: from metered DCGM utilisation, flag tenants whose GPUs sit idle, and put to sleep
those that opted in (docs/kubernetes.md, "Idle clusters asleep").

A tenant is idle when, over the last IDLE_WINDOW, it held GPUs in every hour and used them below
IDLE_UTILISATION (utilisation-weighted GPU-seconds over GPU-seconds, per hour of the usage ledger; so the
window is read to the hour). Flagging tells the owners once (audit row, e-mail, the budget's webhook, the
tenant page); with `sleep_when_idle` the tenant's vCluster sleeps (its pods go and free the GPUs) and its
whole guarantee is lent to its cohort (`tenants.services.sleep.flag_idle`, applied by the reconciler). It
wakes by one click (portal, API) or by any kubectl call, which vCluster's sleep mode answers by waking itself:
metering then sees its pods hold GPUs again and gpucloud gives the lent quota back.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction
from django.db.models import Sum
from django.utils import timezone

from billing import webhooks
from billing.models import Budget, UsageEntry, UsageHour
from core.audit import Actor
from tenants.models import Membership, Tenant
from tenants.services.sleep import flag_idle, wake_tenant

log = logging.getLogger(__name__)
ACTOR = Actor.system("idle")
HOUR = timedelta(hours=1)
# Sleep deletes the tenant's pods about a minute after gpucloud asks; GPUs held after this are new activity.
WAKE_GRACE = timedelta(minutes=5)


def _hour(at: datetime) -> datetime:
    return at.replace(minute=0, second=0, microsecond=0)


def idle_since(tenant: Tenant, now: datetime) -> datetime | None:
    """The start of the idle window when the tenant's GPUs were held and idle throughout it, else None."""
    start = now - timedelta(seconds=settings.IDLE_WINDOW)
    if tenant.woken_at is not None and tenant.woken_at > start:
        return None  # idleness counts afresh from a wake-up
    first, last = _hour(start), _hour(now) - HOUR  # the hour in progress may not be metered yet
    hours = {
        row["hour"]: (row["gpu_us"], row["util_gpu_us"])
        for row in UsageHour.objects.filter(tenant=tenant, hour__gte=first, hour__lte=last)
        .values("hour")
        .annotate(gpu_us=Sum("gpu_us"), util_gpu_us=Sum("util_gpu_us"))
    }
    wanted = [first + HOUR * i for i in range(int((last - first) / HOUR) + 1)]
    if not wanted or any(hours.get(hour, (0, 0))[0] <= 0 for hour in wanted):
        return None  # some hour held no GPU: nothing reserved was idle then
    if any(util >= gpu * settings.IDLE_UTILISATION for gpu, util in hours.values()):
        return None
    return first


def active_again(tenant: Tenant, now: datetime) -> bool:
    """A flagged tenant shows activity: asleep, its pods hold GPUs again (someone woke the vCluster); flagged
    only, its GPUs were used at or above the threshold in the last or the current hour."""
    if tenant.asleep_since is not None:
        after = tenant.asleep_since + WAKE_GRACE
        entries = UsageEntry.objects.filter(tenant=tenant, hour__gte=_hour(after), recorded_at__gt=after)
        return bool(entries.aggregate(gpu=Sum("gpu_us"))["gpu"])
    rows = (
        UsageHour.objects.filter(tenant=tenant, hour__gte=_hour(now) - HOUR)
        .values("hour")
        .annotate(gpu=Sum("gpu_us"), util=Sum("util_gpu_us"))
    )
    return any(r["gpu"] > 0 and r["util"] >= r["gpu"] * settings.IDLE_UTILISATION for r in rows)


def check_idle(now: datetime | None = None) -> dict[str, int]:
    """Flag idle tenants (put to sleep those that opted in); wake those active again. Safe to run twice."""
    now = now or timezone.now()
    counts = {"flagged": 0, "asleep": 0, "woken": 0}
    for tenant in Tenant.objects.filter(state=Tenant.State.READY):
        if tenant.idle_since is not None or tenant.asleep_since is not None:
            if active_again(tenant, now):
                wake_tenant(actor=ACTOR, tenant=tenant, reason="activity")
                counts["woken"] += 1
            continue
        since = idle_since(tenant, now)
        if since is None:
            continue
        with transaction.atomic():
            asleep = flag_idle(actor=ACTOR, tenant=tenant, since=since, at=now)
            tenant.refresh_from_db()
            if tenant.idle_since == since:
                _tell_owners(tenant, since, asleep)
        counts["flagged"] += 1
        counts["asleep"] += asleep
    return counts


def _tell_owners(tenant: Tenant, since: datetime, asleep: bool) -> None:
    """The owners hear it once: by e-mail, and through the tenant's budget webhook when it has one."""
    payload: dict[str, Any] = {
        "event": "tenant.idle",
        "tenant": tenant.slug,
        "idle_since": since.isoformat(),
        "window_hours": settings.IDLE_WINDOW / 3600,
        "utilisation_below_percent": settings.IDLE_UTILISATION * 100,
        "asleep": asleep,
    }
    budget = Budget.objects.filter(tenant=tenant).first()
    if budget is not None and budget.webhook_url:
        url = budget.webhook_url
        transaction.on_commit(lambda: webhooks.send(url, payload))
    owners = list(
        Membership.objects.filter(tenant=tenant, role=Membership.Role.OWNER)
        .exclude(user__email="")
        .values_list("user__email", flat=True)
    )
    if owners and settings.BILLING_ALERT_EMAIL_FROM:
        transaction.on_commit(lambda: _send_email(owners, payload))


def _send_email(addresses: list[str], payload: dict[str, Any]) -> None:
    state = "has been put to sleep" if payload["asleep"] else "is idle"
    subject = f"gpucloud: the cluster of {payload['tenant']} {state}"
    body = (
        f"The GPUs of tenant {payload['tenant']} were used below {payload['utilisation_below_percent']:g} % "
        f"since {payload['idle_since']}.\n"
        + (
            "Its cluster sleeps and its guaranteed GPUs are lent to others until it wakes: open the tenant "
            "in the portal and press Wake, or run any kubectl command against it.\n"
            if payload["asleep"]
            else "Release the GPUs you do not use, or let gpucloud put the cluster to sleep (settings).\n"
        )
    )
    try:
        send_mail(subject, body, settings.BILLING_ALERT_EMAIL_FROM, addresses)
    except OSError as exc:
        log.warning("idle e-mail failed", extra={"to": addresses, "error": str(exc)})
