"""Idle tenant clusters (issue 16 §5): flagged from metered DCGM utilisation, put to sleep when opted in,
woken by activity or by hand. Samples go through the real ingestion (dcgm-exporter expositions → ledger)."""

from __future__ import annotations

from datetime import datetime, timedelta
from ipaddress import ip_network

import pytest
from django.core import mail
from django.utils import timezone

from billing.services.budgets import set_budget
from billing.services.idle import check_idle
from billing.services.ingest import ingest_scrape
from billing.tests.conftest import Receiver, Row, exposition, gpu_uuid
from core.audit import Actor
from core.models import AuditEvent
from gpucloud.errors import ValidationFailed
from tenants.models import Tenant
from tenants.services import sleep

ADMIN = Actor.console("tests")
BASE = (timezone.now() - timedelta(hours=12)).replace(minute=0, second=0, microsecond=0)


def hours(h: float) -> datetime:
    return BASE + timedelta(hours=h)


def run_pods(mini, start: float, end: float, util: float, tenant: str = "acme") -> None:
    """Two GPUs of node h100-0 held by the tenant's pods, sampled every half hour from `start` to `end`."""
    steps = int((end - start) * 2)
    for step in range(steps + 1):
        rows = [Row(gpu_uuid("h100-0", i), pod=f"tenant-{tenant}/p{i}", util=util, index=i) for i in (0, 1)]
        ingest_scrape(mini, "h100-0", hours(start + step / 2), exposition("h100-0", rows))


@pytest.fixture
def acme(mini, tenant_on, settings):
    settings.METER_MAX_GAP = 3600  # samples every half hour are continuous
    settings.IDLE_WINDOW, settings.IDLE_UTILISATION = 4 * 3600, 0.05
    tenant = tenant_on("acme")
    Tenant.objects.filter(pk=tenant.pk).update(state=Tenant.State.READY)
    tenant.refresh_from_db()
    return tenant


def test_a_tenant_whose_gpus_idled_for_the_window_is_flagged_and_its_owners_told(
    mini, acme, settings, receivers, django_capture_on_commit_callbacks
):
    settings.BILLING_ALERT_EMAIL_FROM = "gpucloud@example.com"
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    settings.WEBHOOK_ALLOW_HTTP, settings.WEBHOOK_ALLOWED_NETWORKS = True, [ip_network("127.0.0.1/32")]
    hook = Receiver()
    receivers.append(hook)
    set_budget(actor=ADMIN, tenant=acme, monthly_amount="1000", webhook_url=f"{hook.url}/idle")
    run_pods(mini, 0, 5, util=2.0)

    with django_capture_on_commit_callbacks(execute=True):
        counts = check_idle(now=hours(5.2))

    acme.refresh_from_db()
    assert counts == {"flagged": 1, "asleep": 0, "woken": 0}
    assert acme.idle_since == hours(1)
    assert acme.asleep_since is None  # not opted in: flagged only
    assert AuditEvent.objects.get(action="tenant.idle").after["asleep"] is False
    ((method, payload),) = hook.requests
    assert method == "POST"
    assert payload["event"] == "tenant.idle"
    assert payload["tenant"] == "acme"
    assert [m.to for m in mail.outbox] == [["admin@example.com"]]
    assert "idle" in mail.outbox[0].subject

    assert check_idle(now=hours(5.4)) == {"flagged": 0, "asleep": 0, "woken": 0}  # told once
    assert len(mail.outbox) == 1


def test_busy_gpus_or_an_hour_without_gpus_is_not_idle(mini, acme, tenant_on):
    run_pods(mini, 0, 5, util=40.0)
    assert check_idle(now=hours(5.2))["flagged"] == 0
    beta = tenant_on("beta")
    Tenant.objects.filter(pk=beta.pk).update(state=Tenant.State.READY)
    run_pods(mini, 6, 7, util=1.0, tenant="beta")  # idle, but for one hour only
    assert check_idle(now=hours(7.2))["flagged"] == 0


def test_an_opted_in_tenant_sleeps_and_wakes_when_its_pods_hold_gpus_again(mini, acme):
    sleep.set_sleep_settings(actor=ADMIN, tenant=acme, sleep_when_idle=True)
    run_pods(mini, 0, 5, util=1.0)

    assert check_idle(now=hours(5.2)) == {"flagged": 1, "asleep": 1, "woken": 0}
    acme.refresh_from_db()
    assert acme.asleep_since == hours(5.2)
    assert check_idle(now=hours(6))["woken"] == 0  # asleep and quiet: stays asleep

    run_pods(mini, 6.5, 7, util=30.0)  # a kubectl call woke the vCluster: its pods run again
    assert check_idle(now=hours(7.2))["woken"] == 1
    acme.refresh_from_db()
    assert acme.asleep_since is None
    assert acme.idle_since is None
    assert acme.woken_at is not None
    woken = AuditEvent.objects.get(action="tenant.wake")
    assert woken.after == {"idle_since": None, "asleep": False, "reason": "activity"}
    assert woken.before["asleep"] is True


def test_idleness_counts_afresh_after_a_wake_by_hand(mini, acme):
    run_pods(mini, 0, 5, util=1.0)
    check_idle(now=hours(5.2))
    sleep.wake_tenant(actor=ADMIN, tenant=acme)
    assert check_idle(now=hours(5.4))["flagged"] == 0  # the window restarts at the wake-up


def test_the_sleep_delay_is_validated(acme):
    with pytest.raises(ValidationFailed, match="at least a minute"):
        sleep.set_sleep_settings(actor=ADMIN, tenant=acme, sleep_after_inactivity="2 hours")
    with pytest.raises(ValidationFailed):
        sleep.set_sleep_settings(actor=ADMIN, tenant=acme, sleep_after_inactivity="30s")
    tenant = sleep.set_sleep_settings(actor=ADMIN, tenant=acme, sleep_after_inactivity="1h30m")
    assert tenant.sleep_after_inactivity == "1h30m"
