"""Budgets: alerts at 50, 80 and 100 % (audit, webhook, e-mail), optional enforcement."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, HTTPServer
from ipaddress import ip_network

import pytest
from django.core import mail

from billing.models import BudgetAlert
from billing.services.budgets import check_budget, check_budgets, set_budget
from billing.services.ingest import ingest_scrape
from billing.services.rates import create_rate_card
from billing.tests.conftest import Receiver, Row, exposition, gpu_uuid
from core.audit import Actor
from core.models import AuditEvent
from gpucloud.errors import PermissionDenied, ValidationFailed
from tenants.models import Tenant

ADMIN = Actor.console("tests")
NOW = datetime(2026, 5, 20, tzinfo=UTC)


def when(day: int, hour: int) -> datetime:
    return datetime(2026, 5, day, hour, tzinfo=UTC)


def use_gpu_hours(mini, hours: int, start_day: int = 2) -> None:
    """`hours` H100-hours of tenant acme, at 10.00 per GPU-hour."""
    for hour in range(hours + 1):
        ingest_scrape(
            mini,
            "h100-0",
            when(start_day, hour),
            exposition("h100-0", [Row(gpu_uuid("h100-0", 0), pod="tenant-acme/p")]),
        )


@pytest.fixture
def acme(mini, tenant_on, settings):
    settings.METER_MAX_GAP = 3600
    create_rate_card(actor=ADMIN, effective_from=when(1, 0), prices={"h100-80gb": "10.00"})
    tenant = tenant_on("acme")
    Tenant.objects.filter(pk=tenant.pk).update(state=Tenant.State.READY)
    tenant.refresh_from_db()
    return tenant


def test_crossing_50_and_80_percent_raises_each_alert_once(mini, acme):
    budget = set_budget(actor=ADMIN, tenant=acme, monthly_amount="100")
    use_gpu_hours(mini, 5)  # 50.00
    assert [a.threshold for a in check_budget(budget, NOW)] == [50]
    assert check_budget(budget, NOW) == []
    use_gpu_hours(mini, 3, start_day=3)  # 80.00
    assert [a.threshold for a in check_budget(budget, NOW)] == [80]
    events = AuditEvent.objects.filter(action="budget.threshold_crossed").order_by("id")
    assert [e.after["threshold_percent"] for e in events] == [50, 80]
    assert events[1].after["spent"] == "80.00"


def test_an_alert_posts_the_webhook_and_sends_the_email_when_configured(
    mini, acme, settings, django_capture_on_commit_callbacks
):
    settings.BILLING_ALERT_EMAIL_FROM = "billing@gpucloud.example"
    settings.WEBHOOK_ALLOW_HTTP, settings.WEBHOOK_ALLOWED_NETWORKS = True, [ip_network("127.0.0.1/32")]
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    received = []

    class Hook(BaseHTTPRequestHandler):
        def do_POST(self):
            received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args):
            return

    server = HTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=server.handle_request, daemon=True).start()
    budget = set_budget(
        actor=ADMIN,
        tenant=acme,
        monthly_amount="40",
        webhook_url=f"http://127.0.0.1:{server.server_port}/hook",
        email="finance@acme.example",
    )
    use_gpu_hours(mini, 2)  # 20.00 = 50 %
    with django_capture_on_commit_callbacks(execute=True):
        check_budget(budget, NOW)
    server.server_close()
    assert received == [
        {
            "tenant": "acme",
            "threshold_percent": 50,
            "spent": "20.00",
            "budget": "40.00",
            "currency": "USD",
            "month": "2026-05",
        }
    ]
    assert [m.to for m in mail.outbox] == [["finance@acme.example"]]
    assert "50 %" in mail.outbox[0].subject


def test_enforcement_is_off_by_default(mini, acme):
    budget = set_budget(actor=ADMIN, tenant=acme, monthly_amount="10")
    use_gpu_hours(mini, 2)
    assert [a.threshold for a in check_budget(budget, NOW)] == [50, 80, 100]
    acme.refresh_from_db()
    assert acme.state == Tenant.State.READY


def test_enforcement_at_100_percent_holds_the_tenants_queues(mini, acme):
    budget = set_budget(actor=ADMIN, tenant=acme, monthly_amount="10", enforce=True)
    use_gpu_hours(mini, 1)
    check_budget(budget, NOW)
    acme.refresh_from_db()
    assert acme.state == Tenant.State.SUSPENDED  # suspended: Kueue stopPolicy Hold on its queues
    assert BudgetAlert.objects.filter(budget=budget, threshold=100).exists()


def test_a_member_cannot_set_the_budget(people):
    with pytest.raises(PermissionDenied):
        set_budget(actor=Actor.of(people["bob"]), tenant=people["a"], monthly_amount="5")


def test_the_budget_api_sets_and_lists_own_budgets(api, people):
    created = api(people["alice"]).post(
        "/api/v1/budgets/", {"tenant": "tenant-a", "monthly_amount": "250.00"}, format="json"
    )
    assert created.status_code == 201, created.content
    assert created.json()["monthly_amount"] == "250.00"
    assert created.json()["enforce"] is False
    assert api(people["charlie"]).get("/api/v1/budgets/").json()["count"] == 0
    assert api(people["charlie"]).get("/api/v1/budgets/tenant-a/").status_code == 404
    # bob is a viewer: money is for owners, admins and billing viewers (docs/permissions.md); he is told so
    assert api(people["bob"]).get("/api/v1/budgets/tenant-a/").status_code == 403


def test_the_periodic_check_looks_at_every_budget(mini, acme):
    budget = set_budget(actor=ADMIN, tenant=acme, monthly_amount="100")
    use_gpu_hours(mini, 6)
    assert check_budgets(now=NOW) == 1
    assert list(budget.alerts.values_list("threshold", flat=True)) == [50]


def test_a_webhook_destination_is_checked_again_when_the_alert_is_sent(
    mini, acme, settings, receivers, django_capture_on_commit_callbacks
):
    settings.WEBHOOK_ALLOW_HTTP, settings.WEBHOOK_ALLOWED_NETWORKS = True, [ip_network("127.0.0.1/32")]
    receiver = Receiver()
    receivers.append(receiver)
    budget = set_budget(actor=ADMIN, tenant=acme, monthly_amount="40", webhook_url=f"{receiver.url}/hook")
    settings.WEBHOOK_ALLOWED_NETWORKS = []  # the operator no longer allows loopback
    use_gpu_hours(mini, 2)  # 20.00 = 50 %

    with django_capture_on_commit_callbacks(execute=True):
        assert [a.threshold for a in check_budget(budget, NOW)] == [50]  # the alert stands…

    assert receiver.requests == []  # …but nothing reaches loopback


def test_a_webhook_redirect_is_not_followed(
    mini, acme, settings, receivers, django_capture_on_commit_callbacks
):
    settings.WEBHOOK_ALLOW_HTTP, settings.WEBHOOK_ALLOWED_NETWORKS = True, [ip_network("127.0.0.1/32")]
    inside = Receiver()
    bouncer = Receiver(status=302, location=f"{inside.url}/internal")
    receivers.extend([inside, bouncer])
    budget = set_budget(actor=ADMIN, tenant=acme, monthly_amount="40", webhook_url=f"{bouncer.url}/hook")
    use_gpu_hours(mini, 2)

    with django_capture_on_commit_callbacks(execute=True):
        check_budget(budget, NOW)

    assert [method for method, _ in bouncer.requests] == ["POST"]
    assert inside.requests == []


def test_changing_a_budget_without_a_webhook_keeps_the_stored_one(people, settings):
    settings.WEBHOOK_ALLOW_HTTP, settings.WEBHOOK_ALLOWED_NETWORKS = True, [ip_network("127.0.0.1/32")]
    tenant = people["a"]
    set_budget(actor=ADMIN, tenant=tenant, monthly_amount="10", webhook_url="http://127.0.0.1:8299/s3cr3t")

    budget = set_budget(actor=ADMIN, tenant=tenant, monthly_amount="20", email="f@a.example", enforce=True)

    assert budget.webhook_url == "http://127.0.0.1:8299/s3cr3t"
    budget.refresh_from_db()
    assert (budget.monthly_amount, budget.webhook_url) == (Decimal("20.00"), "http://127.0.0.1:8299/s3cr3t")


def test_an_empty_webhook_removes_it_and_a_new_url_replaces_it(people, settings):
    settings.WEBHOOK_ALLOW_HTTP, settings.WEBHOOK_ALLOWED_NETWORKS = True, [ip_network("127.0.0.1/32")]
    tenant = people["a"]
    set_budget(actor=ADMIN, tenant=tenant, monthly_amount="10", webhook_url="http://127.0.0.1:8299/old")

    assert set_budget(actor=ADMIN, tenant=tenant, monthly_amount="10", webhook_url="").webhook_url == ""
    replaced = set_budget(
        actor=ADMIN, tenant=tenant, monthly_amount="10", webhook_url="http://127.0.0.1:8299/new"
    )
    assert replaced.webhook_url == "http://127.0.0.1:8299/new"


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("currency", "EURO", "three letters"),
        ("email", "not-an-address", "is not an e-mail address"),
        ("monthly_amount", "1e17", "from 0.01 to 9999999999999999.99"),
    ],
)
def test_a_budget_the_table_cannot_hold_is_refused_naming_the_field(people, field, value, says):
    arguments = {"monthly_amount": "10", field: value}
    with pytest.raises(ValidationFailed) as refused:
        set_budget(actor=ADMIN, tenant=people["a"], **arguments)
    assert says in refused.value.errors[field][0]


def test_the_budget_api_keeps_the_webhook_when_the_body_leaves_it_out(api, people, settings):
    settings.WEBHOOK_ALLOW_HTTP, settings.WEBHOOK_ALLOWED_NETWORKS = True, [ip_network("127.0.0.1/32")]
    alice = api(people["alice"])
    body = {"tenant": "tenant-a", "monthly_amount": "100", "webhook_url": "http://127.0.0.1:8299/hook"}
    assert alice.post("/api/v1/budgets/", body, format="json").status_code == 201

    kept = alice.post("/api/v1/budgets/", {"tenant": "tenant-a", "monthly_amount": "120"}, format="json")
    removed = alice.post(
        "/api/v1/budgets/", {"tenant": "tenant-a", "monthly_amount": "120", "webhook_url": ""}, format="json"
    )

    assert kept.status_code == 201
    assert kept.json()["webhook_url"] == "http://127.0.0.1:8299/…"
    assert removed.status_code == 201
    assert removed.json()["webhook_url"] == ""
