"""`manage.py meter ingest FILE --node NAME --at ISO8601`."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from billing.models import ScrapeRecord, UsageEntry

FIXTURE = Path(__file__).parent / "fixtures" / "synthetic-h100x8-node-podlabels.prom"


def meter(*args: str) -> str:
    out = io.StringIO()
    call_command("meter", *args, stdout=out)
    return out.getvalue()


def test_it_ingests_a_saved_exposition_as_if_scraped_then(mini):
    first = meter(
        "ingest",
        str(FIXTURE),
        "--node",
        "gpu-node-00001",
        "--at",
        "2026-05-10T12:00:00Z",
        "--host-cluster",
        "mini",
    )
    assert "ok, 8 devices, 0 garbled" in first
    meter(
        "ingest",
        str(FIXTURE),
        "--node",
        "gpu-node-00001",
        "--at",
        "2026-05-10T12:00:30Z",
        "--host-cluster",
        "mini",
    )
    # 8 H100s, each held by the same pod at both scrapes: 8 × 30 GPU-seconds, in namespaces no tenant owns.
    assert sum(UsageEntry.objects.values_list("gpu_us", flat=True)) == 8 * 30 * 1_000_000
    assert set(UsageEntry.objects.values_list("gpu_class", flat=True)) == {"h100-80gb"}
    assert ScrapeRecord.objects.filter(source="file").count() == 2


def test_the_same_file_at_the_same_time_adds_nothing(mini):
    for _ in range(2):
        meter(
            "ingest",
            str(FIXTURE),
            "--node",
            "n1",
            "--at",
            "2026-05-10T12:00:00+00:00",
            "--host-cluster",
            "mini",
        )
    meter(
        "ingest", str(FIXTURE), "--node", "n1", "--at", "2026-05-10T12:00:30+00:00", "--host-cluster", "mini"
    )
    meter(
        "ingest", str(FIXTURE), "--node", "n1", "--at", "2026-05-10T12:00:30+00:00", "--host-cluster", "mini"
    )
    assert sum(UsageEntry.objects.values_list("gpu_us", flat=True)) == 240 * 1_000_000
    assert ScrapeRecord.objects.count() == 2


def test_a_time_without_a_zone_is_refused(mini):
    with pytest.raises(CommandError, match="no time zone"):
        meter("ingest", str(FIXTURE), "--node", "n1", "--at", "2026-05-10T12:00:00")


def test_an_unknown_node_needs_its_host_cluster_named_when_there_are_several(mini, demo_fleet):
    with pytest.raises(CommandError, match="--host-cluster"):
        meter("ingest", str(FIXTURE), "--node", "nowhere-1", "--at", "2026-05-10T12:00:00Z")
