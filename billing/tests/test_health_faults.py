"""GPU faults through the real collection path: the simulated exporters over HTTP show an XID, a double-bit
ECC error or a GPU gone from the bus; the round that shows it quarantines the GPU, bills none of it from
then on, and writes the credit the tenant's next invoice carries, once, however often it is replayed."""

from __future__ import annotations

import urllib.request
from datetime import datetime
from decimal import Decimal

import pytest
from django.db.models import Sum

from billing import exports
from billing.collect import collect_exporters
from billing.models import MICRO, HealthCredit, InvoiceLine, ScrapeRecord, UsageEntry
from billing.services.ingest import ingest_rounds
from billing.services.invoicing import draft_invoice, issue_invoice
from billing.services.rates import create_rate_card
from billing.simexporter import cluster_facts
from billing.tests.conftest import T0, at, gpu_uuid
from core.audit import Actor
from core.models import AuditEvent
from fleet.models import Gpu, Node
from health.models import HealthEvent, Quarantine
from tenants.capacity import gpus_by_host_and_model

pytestmark = pytest.mark.django_db(transaction=True)  # the exporters read the database from their own threads
ADMIN = Actor.console("tests")
XID = "DCGM_FI_DEV_XID_ERRORS"


@pytest.fixture
def acme(mini, tenant_on, make_pod):
    """acme trains on H100 0 of h100-0 from 10 minutes before T0 until 10 minutes after."""
    tenant = tenant_on("acme")
    make_pod("train", "tenant-acme", "h100-80gb", "h100-0", [0], at(-600), at(600), tenant=tenant)
    create_rate_card(
        actor=ADMIN, effective_from=at(-86400), prices={"h100-80gb": "2.00", "a100-80gb": "1.40"}
    )
    return tenant


def collect(mini, pool, t: float) -> dict[str, ScrapeRecord]:
    exporters, clock = pool
    clock.now = at(t)
    return collect_exporters(mini, at(t), exporters.targets, cluster_facts(mini, at(t), 60))


def billed(**filters) -> int:
    return (UsageEntry.objects.filter(**filters).aggregate(s=Sum("gpu_us"))["s"] or 0) // MICRO


def test_an_xid_79_quarantines_the_gpu_in_the_round_that_shows_it_and_stops_billing(mini, acme, pool):
    exporters, _ = pool
    for t in (0, 30, 60):
        collect(mini, pool, t)
    assert billed(tenant=acme) == 60
    exporters.servers["h100-0"].exporter.inject(0, **{XID: 79})
    collect(mini, pool, 90)

    gpu = Gpu.objects.get(uuid=gpu_uuid("h100-0", 0))
    assert gpu.health == Gpu.Health.QUARANTINED
    event = HealthEvent.objects.get(gpu=gpu)
    assert (event.signal, event.value, event.severity, event.action) == ("xid", "79", "fatal", "quarantine")
    assert event.first_seen == at(90)
    assert event.closed_at is None
    assert Quarantine.objects.get(gpu=gpu, released_at=None).reason == "xid-79"
    assert AuditEvent.objects.filter(action="gpu.quarantine", object_id=gpu.uuid).count() == 1
    for t in (120, 150):
        collect(mini, pool, t)
    assert billed(tenant=acme) == 60  # nothing after the last clean sample at 60 s
    assert billed(device=gpu.uuid, hour__gte=at(0)) == 60
    assert HealthEvent.objects.count() == 1  # the same XID again is the same event
    assert HealthEvent.objects.get().last_seen == at(150)
    # capacity, and so admission, stop counting it; the rest of the node is in service
    assert gpus_by_host_and_model()[("mini", "h100-80gb")] == (4, 3)
    assert Node.objects.get(name="h100-0").state == Node.State.READY


def test_the_credit_covers_the_last_clean_sample_to_the_allocations_end_once(mini, acme, pool):
    exporters, _ = pool
    bodies: list[tuple[datetime, dict[str, str]]] = []
    for t in (0, 30, 60, 90, 120):
        if t == 90:
            exporters.servers["h100-0"].exporter.inject(0, **{XID: 79})
        exporters_clock = pool[1]
        exporters_clock.now = at(t)
        body = {n: urllib.request.urlopen(u, timeout=5).read().decode() for n, u in exporters.targets.items()}
        bodies.append((at(t), body))
        collect(mini, pool, t)
    credit = HealthCredit.objects.get()
    assert (credit.tenant, credit.namespace, credit.pod, credit.gpu_class) == (
        acme,
        "tenant-acme",
        "train",
        "h100-80gb",
    )
    assert (credit.lost_from, credit.lost_until) == (
        at(60),
        at(600),
    )  # to the pod's end, which the cluster knows
    assert credit.gpu_us == 540 * MICRO
    ledger = (UsageEntry.objects.count(), billed())

    # replaying the very same scrapes, and retrying the rounds, change nothing
    ingest_rounds(mini, bodies, facts=cluster_facts(mini, at(120), 60))
    for t in (90, 120):
        collect(mini, pool, t)
    assert (UsageEntry.objects.count(), billed()) == ledger
    assert HealthCredit.objects.count() == 1
    assert Quarantine.objects.count() == 1
    assert HealthEvent.objects.count() == 1

    invoice = draft_invoice(actor=ADMIN, tenant=acme, year=T0.year, month=T0.month)
    invoice = draft_invoice(actor=ADMIN, tenant=acme, year=T0.year, month=T0.month)  # a retry
    credits = InvoiceLine.objects.filter(invoice=invoice, kind=InvoiceLine.Kind.CREDIT)
    assert credits.count() == 1
    line = credits.get()
    assert line.gpu_hours == Decimal("0.150000")
    assert line.amount == Decimal("-0.30")
    event = HealthEvent.objects.get()
    assert credit.gpu_uuid in line.description
    assert event.public_id in line.description
    assert "0.15 GPU-hours" in line.description
    usage = InvoiceLine.objects.get(invoice=invoice, kind=InvoiceLine.Kind.USAGE)
    assert invoice.total == usage.amount + line.amount

    focus = [row for row in exports.focus_rows([invoice]) if row["ChargeCategory"] == "Credit"]
    assert len(focus) == 1
    assert focus[0]["BilledCost"] == "-0.30"
    assert focus[0]["ConsumedQuantity"] == ""

    issue_invoice(actor=ADMIN, invoice=invoice)
    assert HealthCredit.objects.get().invoice == invoice
    june = draft_invoice(actor=ADMIN, tenant=acme, year=T0.year, month=T0.month + 1)
    assert not InvoiceLine.objects.filter(invoice=june, kind=InvoiceLine.Kind.CREDIT).exists()


def test_the_credit_is_capped_by_the_setting(mini, acme, pool, settings):
    settings.HEALTH_CREDIT_MAX_HOURS = 0.05  # three minutes
    exporters, _ = pool
    for t in (0, 30):
        collect(mini, pool, t)
    exporters.servers["h100-0"].exporter.inject(0, DCGM_FI_DEV_ECC_DBE_VOL_TOTAL=2)
    collect(mini, pool, 60)
    credit = HealthCredit.objects.get()
    assert (credit.lost_from, credit.lost_until, credit.gpu_us) == (at(30), at(210), 180 * MICRO)
    assert HealthEvent.objects.get().signal == "ecc_dbe"


def test_a_gpu_missing_from_its_nodes_scrape_is_quarantined_while_the_node_answers(mini, acme, pool):
    exporters, _ = pool
    for t in (0, 30):
        collect(mini, pool, t)
    exporters.servers["h100-0"].exporter.drop(0)
    records = collect(mini, pool, 60)
    assert records["h100-0"].status == ScrapeRecord.Status.OK
    gpu = Gpu.objects.get(uuid=gpu_uuid("h100-0", 0))
    assert gpu.health == Gpu.Health.QUARANTINED
    event = HealthEvent.objects.get(gpu=gpu)
    assert (event.signal, event.severity, event.recommended) == ("gpu_missing", "fatal", "reboot node")
    assert HealthCredit.objects.get().lost_from == at(30)
    # a node whose exporter does not answer has no GPU missing
    exporters.servers["a100-0"].stop()
    collect(mini, pool, 90)
    assert not HealthEvent.objects.filter(node__name="a100-0").exists()


def test_an_application_xid_is_recorded_and_ignored(mini, acme, pool):
    exporters, _ = pool
    exporters.servers["h100-0"].exporter.inject(1, **{XID: 13})
    collect(mini, pool, 0)
    event = HealthEvent.objects.get()
    assert (event.signal, event.value, event.severity, event.action) == ("xid", "13", "info", "none")
    assert not Gpu.objects.filter(health=Gpu.Health.QUARANTINED).exists()


def test_a_mig_slices_fault_quarantines_its_parent_gpu(mini, tenant_on, make_pod, pool):
    tenant = tenant_on("acme")
    make_pod("infer", "tenant-acme", "a100-80gb.mig-3g.40gb", "a100-0", [0], at(-600), gi=1, tenant=tenant)
    exporters, _ = pool
    for t in (0, 30):
        collect(mini, pool, t)
    exporters.servers["a100-0"].exporter.inject(0, **{XID: 48})
    collect(mini, pool, 60)
    gpu = Gpu.objects.get(uuid=gpu_uuid("a100-0", 0))
    assert gpu.health == Gpu.Health.QUARANTINED
    credit = HealthCredit.objects.get()
    assert (credit.device, credit.gpu_class) == (f"{gpu.uuid}/1", "a100-80gb.mig-3g.40gb")
    assert credit.lost_until == at(60)  # the pod's end is not known: the allocation ended with the GPU


def test_a_node_whose_gpus_are_all_out_is_quarantined_whole(mini, tenant_on, pool):
    exporters, _ = pool
    collect(mini, pool, 0)
    exporters.servers["a100-0"].exporter.inject(0, **{XID: 79})
    exporters.servers["a100-0"].exporter.inject(1, DCGM_FI_DEV_ROW_REMAP_FAILURE=1)
    collect(mini, pool, 30)
    node = Node.objects.get(name="a100-0")
    assert node.state == Node.State.QUARANTINED
    assert Quarantine.objects.filter(node=node, gpu=None, released_at=None).count() == 1
    assert gpus_by_host_and_model()[("mini", "a100-80gb")] == (2, 0)


def test_a_gpu_still_missing_stays_out_and_comes_back_once_listed_and_clean(mini, acme, pool, settings):
    settings.HEALTH_EVENT_CLEAR_AFTER = 30
    settings.HEALTH_CLEAN_WINDOW = 60
    exporters, _ = pool
    for t in (0, 30):
        collect(mini, pool, t)
    exporters.servers["h100-0"].exporter.drop(2)
    for t in range(60, 300, 30):  # far past the clear-after and clean windows: still missing, still out
        collect(mini, pool, t)
    gpu = Gpu.objects.get(uuid=gpu_uuid("h100-0", 2))
    assert gpu.health == Gpu.Health.QUARANTINED
    event = HealthEvent.objects.get(gpu=gpu)
    assert (event.closed_at, event.last_seen) == (None, at(270))
    exporters.servers["h100-0"].exporter.drop(2, dropped=False)  # the node was rebooted
    collect(mini, pool, 300)
    event.refresh_from_db()
    assert event.closed_at == at(300)
    assert Gpu.objects.get(pk=gpu.pk).health == Gpu.Health.QUARANTINED
    collect(mini, pool, 330)  # 60 s clean since the GPU was last missing, at 270 s
    assert Gpu.objects.get(pk=gpu.pk).health == Gpu.Health.HEALTHY
