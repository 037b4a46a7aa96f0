"""The ingest service: exposition → tenants → integration → ledger rows, exactly once."""

from __future__ import annotations

from django.db.models import Sum

from billing.models import MICRO, ScrapeRecord, UnknownNode, UsageEntry, UsageHour
from billing.services.ingest import ingest_scrape
from billing.tests.conftest import A100, Row, at, exposition, gpu_uuid

GPU0 = gpu_uuid("h100-0", 0)
GPU1 = gpu_uuid("h100-0", 1)


def totals(**filters):
    return UsageEntry.objects.filter(**filters).aggregate(
        gpu=Sum("gpu_us"), util=Sum("util_gpu_us"), mj=Sum("millijoules")
    )


def scrape(mini, t, *rows, node="h100-0"):
    return ingest_scrape(mini, node, at(t), exposition(node, rows))


def test_a_pod_seen_in_three_rounds_is_billed_three_intervals_to_its_tenant(mini, tenant_on):
    tenant = tenant_on("acme")
    pod = "tenant-acme/train-1"
    for t, holder in ((0, ""), (30, pod), (60, pod), (90, pod), (120, "")):
        # 300 W all along: 9,000 J per 30 s interval.
        record = scrape(mini, t, Row(GPU0, pod=holder, util=40 if holder else 0, energy_mj=t * 300_000))
        assert record.status == ScrapeRecord.Status.OK
    assert totals(tenant=tenant) == {"gpu": 90 * MICRO, "util": 36 * MICRO, "mj": 27_000_000}
    assert totals(tenant__isnull=True) == {"gpu": 30 * MICRO, "util": 0, "mj": 9_000_000}
    assert set(UsageEntry.objects.values_list("gpu_class", flat=True)) == {"h100-80gb"}


def test_ingesting_the_same_scrape_twice_adds_nothing(mini, tenant_on):
    tenant_on("acme")
    scrape(mini, 0, Row(GPU0, pod="tenant-acme/a"))
    first = scrape(mini, 30, Row(GPU0, pod="tenant-acme/a"))
    rows = UsageEntry.objects.count()
    again = scrape(mini, 30, Row(GPU0, pod="tenant-acme/a"))
    assert again.pk == first.pk
    assert UsageEntry.objects.count() == rows
    assert totals()["gpu"] == 30 * MICRO
    assert ScrapeRecord.objects.count() == 2


def test_a_late_scrape_is_counted_and_never_integrated(mini, tenant_on):
    tenant_on("acme")
    for t in (0, 30, 60):
        scrape(mini, t, Row(GPU0, pod="tenant-acme/a"), Row(GPU1, index=1))
    late = scrape(mini, 45, Row(GPU0, pod="tenant-acme/b"), Row(GPU1, index=1))
    assert (late.late, late.duplicates, late.status) == (2, 0, ScrapeRecord.Status.OK)
    assert "2 late samples" in late.reason
    assert totals(pod="b")["gpu"] is None
    assert totals()["gpu"] == 2 * 60 * MICRO


def test_a_garbled_line_makes_the_scrape_partial_and_keeps_the_valid_devices(mini, tenant_on):
    tenant = tenant_on("acme")
    scrape(mini, 0, Row(GPU0, pod="tenant-acme/a"), Row(GPU1, index=1, pod="tenant-acme/b"))
    text = exposition("h100-0", [Row(GPU0, pod="tenant-acme/a")])
    text += f'DCGM_FI_DEV_GPU_UTIL{{gpu="1",UUID="{GPU1}",hostname="h100-0",pod="b" 17\n'  # cut label set
    record = ingest_scrape(mini, "h100-0", at(30), text)
    assert (record.status, record.garbled, record.devices) == (ScrapeRecord.Status.PARTIAL, 1, 1)
    assert "line" in record.reason
    assert totals(tenant=tenant, device=GPU0)["gpu"] == 30 * MICRO
    assert totals(device=GPU1)["gpu"] is None  # not seen this round: nothing billed yet


def test_an_exposition_with_no_device_is_a_failed_scrape(mini):
    record = ingest_scrape(mini, "h100-0", at(0), "<html>502 Bad Gateway</html>\n")
    assert record.status == ScrapeRecord.Status.FAILED
    assert "no DCGM device samples" in record.reason
    assert UsageEntry.objects.count() == 0


def test_an_interval_longer_than_the_max_gap_is_not_billed_and_is_recorded(mini, tenant_on, settings):
    settings.METER_MAX_GAP = 60
    tenant_on("acme")
    for t in (0, 30, 121, 151):
        record = scrape(mini, t, Row(GPU0, pod="tenant-acme/a"))
        assert record.gaps == (1 if t == 121 else 0)
    assert totals()["gpu"] == 60 * MICRO
    assert "gaps longer than METER_MAX_GAP" in ScrapeRecord.objects.get(at=at(121)).reason


def test_duplicate_rows_of_one_device_in_one_scrape_count_once(mini, tenant_on):
    tenant_on("acme")
    scrape(mini, 0, Row(GPU0, pod="tenant-acme/a"))
    text = exposition("h100-0", [Row(GPU0, pod="tenant-acme/a")])
    record = ingest_scrape(mini, "h100-0", at(30), text + text.split("\n", 2)[2])
    assert record.devices == 1
    assert totals()["gpu"] == 30 * MICRO


def test_a_mig_instance_is_billed_as_its_mig_class_with_its_share_of_the_energy(mini, tenant_on):
    tenant = tenant_on("acme")
    gpu = gpu_uuid("a100-0", 0)
    for t in (0, 30, 60):
        rows = [
            Row(gpu, model=A100, pod="", energy_mj=t * 700_000),  # the parent GPU: 700 W
            Row(gpu, model=A100, pod="tenant-acme/infer", profile="3g.40gb", gi="1", util=None),
            Row(gpu, model=A100, pod="", profile="3g.40gb", gi="2", util=None),
        ]
        scrape(mini, t, *rows, node="a100-0")
    assert totals(tenant=tenant) == {"gpu": 60 * MICRO, "util": 0, "mj": 18_000_000}  # 42 kJ × 3/7
    assert set(UsageEntry.objects.filter(tenant=tenant).values_list("gpu_class", "device")) == {
        ("a100-80gb.mig-3g.40gb", f"{gpu}/1")
    }
    assert totals(tenant__isnull=True)["gpu"] == 60 * MICRO  # instance 2, idle; the parent is not billed


def test_pods_time_slicing_a_gpu_split_it_and_are_billed_as_the_shared_class(mini, tenant_on):
    acme, beta = tenant_on("acme"), tenant_on("beta")
    for t in (0, 30, 60):
        scrape(mini, t, Row(GPU0, pod="tenant-acme/a"), Row(GPU0, pod="tenant-beta/b"))
    assert totals(tenant=acme)["gpu"] == totals(tenant=beta)["gpu"] == 30 * MICRO
    assert set(UsageEntry.objects.values_list("gpu_class", flat=True)) == {"h100-80gb.shared"}


def test_a_pod_in_a_namespace_no_tenant_owns_is_platform_time(mini, tenant_on):
    tenant_on("acme")
    for t in (0, 30):
        scrape(mini, t, Row(GPU0, pod="kube-system/dcgm-diag"))
    entry = UsageEntry.objects.get()
    assert (entry.tenant, entry.namespace, entry.gpu_us) == (None, "kube-system", 30 * MICRO)


def test_samples_from_a_node_the_fleet_does_not_know_are_billed_and_the_node_is_reported(mini, tenant_on):
    tenant = tenant_on("acme")
    for t in (0, 30, 60):
        scrape(mini, t, Row("GPU-stranger", pod="tenant-acme/a"), node="surprise-7")
    assert totals(tenant=tenant)["gpu"] == 60 * MICRO
    report = UnknownNode.objects.get()
    assert (report.name, report.scrapes, report.first_seen, report.last_seen) == (
        "surprise-7",
        3,
        at(0),
        at(60),
    )


def test_an_unknown_gpu_model_is_billed_under_an_unknown_class(mini, tenant_on):
    tenant_on("acme")
    for t in (0, 30):
        scrape(mini, t, Row(GPU0, model="NVIDIA T400 4GB", pod="tenant-acme/a"))
    assert UsageEntry.objects.get().gpu_class == "unknown:NVIDIA T400 4GB"


def test_the_hourly_sums_equal_the_ledger_and_a_repeated_scrape_adds_nothing_to_them(mini, tenant_on):
    tenant = tenant_on("acme")
    for t in (3540, 3570, 3600, 3630, 3630):  # across an hour boundary, the last scrape twice
        scrape(mini, t, Row(GPU0, pod="tenant-acme/a", energy_mj=t * 1000), Row(GPU1, index=1))
    hours = UsageHour.objects.filter(tenant=tenant).order_by("hour")
    assert [(h.hour, h.gpu_us, h.millijoules) for h in hours] == [
        (at(0), 60 * MICRO, 60_000),
        (at(3600), 30 * MICRO, 30_000),
    ]
    assert UsageHour.objects.aggregate(s=Sum("gpu_us"))["s"] == totals()["gpu"] == 180 * MICRO
