"""The audit log shows what each write changed, before → after, only the fields that changed, readably: in
the model (`AuditEvent.changes`), the API (`changes` of each event) and the portal's audit pages."""

from __future__ import annotations

import html
import re
from datetime import UTC, datetime

from billing.services import budgets, invoicing
from core.audit import Actor
from core.models import AuditEvent
from fleet.models import Gpu, GpuClass
from health.models import HealthEvent
from health.services import quarantines
from tenants.services import lifecycle, quotas, sleep


def quota_changed(people) -> AuditEvent:
    admin, h200 = Actor.of(people["admin"]), GpuClass.objects.get(name="h200-141gb")
    quotas.set_quota(actor=admin, tenant=people["a"], gpu_class=h200, guaranteed=8, burst=4)
    quotas.set_quota(actor=admin, tenant=people["a"], gpu_class=h200, guaranteed=8, burst=6)
    return AuditEvent.objects.filter(action="quota.set").latest("id")


def test_a_change_lists_only_the_fields_that_changed(people):
    event = quota_changed(people)
    assert event.changes() == [{"field": "burst", "before": 4, "after": 6}]


def test_a_creation_lists_what_was_made_and_a_removal_what_was_there():
    made = AuditEvent(before=None, after={"slug": "vision", "trust_tier": "standard"})
    assert made.changes() == [
        {"field": "slug", "before": None, "after": "vision"},
        {"field": "trust_tier", "before": None, "after": "standard"},
    ]
    gone = AuditEvent(before={"role": "viewer"}, after=None)
    assert gone.changes() == [{"field": "role", "before": "viewer", "after": None}]


def test_nested_values_are_named_by_their_path():
    event = AuditEvent(
        before={"prices": {"h200-141gb": "3.10", "a100-80gb": "1.90"}, "currency": "USD"},
        after={"prices": {"h200-141gb": "3.20", "a100-80gb": "1.90"}, "currency": "USD"},
    )
    assert event.changes() == [{"field": "prices.h200-141gb", "before": "3.10", "after": "3.20"}]


def test_the_api_gives_each_event_its_changes(api, people):
    quota_changed(people)
    events = api(people["alice"]).get("/api/v1/audit-events/", {"action": "quota.set"}).json()["results"]
    assert events[0]["changes"] == [{"field": "burst", "before": 4, "after": 6}]
    assert events[0]["before"]["guaranteed"] == events[0]["after"]["guaranteed"] == 8


def cell_texts(page: str) -> list[str]:
    """The text of each change cell of the audit table, tags dropped and spaces collapsed."""
    cells = re.findall(r'<ul class="diff">(.*?)</ul>', page, re.S)
    return [" ".join(html.unescape(re.sub(r"<[^>]+>", " ", c)).split()) for c in cells]


def test_the_tenant_audit_page_shows_before_and_after_not_python_dicts(client, people):
    quota_changed(people)
    client.force_login(people["alice"])
    page = client.get("/tenants/tenant-a/audit/", {"action": "quota.set"}).content.decode()
    cells = cell_texts(page)
    assert cells[0] == "burst: 4 → 6"
    assert cells[1] == "burst: 4 gpu_class: h200-141gb guaranteed: 8 lendable: — weight: 1"  # the creation
    assert "{&#x27;" not in page
    assert "{'" not in html.unescape(page)  # no Python dict repr anywhere


def test_the_platform_audit_log_shows_changes_too(client, people):
    lifecycle.update_tenant(actor=Actor.of(people["alice"]), tenant=people["a"], display_name="Team A")
    client.force_login(people["admin"])
    page = client.get("/audit/", {"action": "tenant.update"}).content.decode()
    assert cell_texts(page) == ["display_name: tenant-a → Team A"]


def test_a_budget_change_names_only_what_changed(people):
    admin = Actor.of(people["admin"])
    budgets.set_budget(actor=admin, tenant=people["a"], monthly_amount="1000")
    budgets.set_budget(actor=admin, tenant=people["a"], monthly_amount="1000", currency="EUR")
    event = AuditEvent.objects.filter(action="budget.set").order_by("-id").first()
    assert event.changes() == [{"field": "currency", "before": "USD", "after": "EUR"}]


def test_idling_issuing_and_quarantine_record_the_state_before(people, demo_fleet):
    admin = Actor.of(people["admin"])
    sleep.flag_idle(actor=Actor.system("idle"), tenant=people["a"], since=datetime(2026, 11, 2, tzinfo=UTC))
    idle = AuditEvent.objects.get(action="tenant.idle")
    assert idle.changes() == [{"field": "idle_since", "before": None, "after": "2026-11-02T00:00:00+00:00"}]

    invoice = invoicing.draft_invoice(actor=admin, tenant=people["a"], year=2026, month=11)
    invoicing.issue_invoice(actor=admin, invoice=invoice)
    issued = AuditEvent.objects.get(action="invoice.issue")
    assert {"field": "state", "before": "draft", "after": "issued"} in issued.changes()

    gpu = Gpu.objects.filter(node__host_cluster=demo_fleet).select_related("node").first()
    moment = datetime(2026, 11, 2, tzinfo=UTC)
    event = HealthEvent.objects.create(
        host_cluster=demo_fleet, node=gpu.node, gpu=gpu, subject=f"gpu:{gpu.index}", signal="xid",
        value="79", severity="fatal", action="quarantine", source="dcgm", first_seen=moment, last_seen=moment,
    )  # fmt: skip
    quarantines.quarantine(event, moment)
    out = AuditEvent.objects.get(action="gpu.quarantine")
    assert out.changes()[0] == {"field": "state", "before": "in service", "after": "quarantined"}
