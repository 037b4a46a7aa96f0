"""`manage.py tenant_standing SLUG`: the standing as tables (or the API's JSON), cost unless `--no-cost`."""

from __future__ import annotations

import io
import json
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from billing.services import rates
from core.audit import Actor
from fleet.models import GpuClass
from tenants.services import quotas

ADMIN = Actor.console("tests")
H100 = "h100-80gb"


def standing(*args: str) -> str:
    out = io.StringIO()
    call_command("tenant_standing", *args, stdout=out)
    return out.getvalue()


@pytest.fixture
def acme(tenant_on, make_pod):
    acme, other = tenant_on("acme"), tenant_on("other")
    gpu_class = GpuClass.objects.get(name=H100)
    quotas.set_quota(actor=ADMIN, tenant=acme, gpu_class=gpu_class, guaranteed=3)
    quotas.set_quota(actor=ADMIN, tenant=other, gpu_class=gpu_class, guaranteed=0, burst=2)
    rates.create_rate_card(
        actor=ADMIN, effective_from=timezone.now() - timedelta(days=1), prices={H100: "2.00"}
    )
    start = timezone.now() - timedelta(hours=1)
    make_pod("train", "tenant-acme", H100, "h100-0", [0], start, tenant=acme)
    make_pod("borrower", "tenant-other", H100, "h100-0", [1, 2], start, tenant=other)
    return acme


def test_it_prints_the_classes_and_pods_with_their_cost(acme):
    lines = standing("acme").splitlines()
    header = lines[1].split()
    assert header[:2] == ["GPU", "class"]
    assert lines[2].split() == [H100, "3", "0", "1", "0", "2", "2.000000", "2.00"]  # lends 2 to `other`
    assert lines[5].split()[:3] == ["train", H100, "1"]
    assert lines[-1] == "spent this month: 0 USD"


def test_without_cost_and_as_json(acme):
    assert "spent" not in standing("acme", "--no-cost")
    body = json.loads(standing("acme", "--json", "--no-cost"))
    assert body["classes"][0]["lent"] == 2
    assert "cost_per_hour" not in body["classes"][0]
    assert json.loads(standing("acme", "--json"))["currency"] == "USD"


def test_an_unknown_tenant_is_named(db):
    with pytest.raises(CommandError, match="no tenant 'nobody'"):
        standing("nobody")
