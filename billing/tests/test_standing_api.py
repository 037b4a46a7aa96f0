"""`GET /api/v1/tenants/{slug}/standing/`: every role of the tenant sees where it stands; the money fields
only the roles that may see cost; another tenant's standing is not found."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from billing.services import rates
from core.audit import Actor
from fleet.models import GpuClass
from tenants.services import members, quotas

ADMIN = Actor.console("tests")
H100 = "h100-80gb"
MONEY = {"currency", "spent_this_month"}


@pytest.fixture
def acme(tenant_on, make_user, make_pod):
    """acme on `mini`: 1 H100 guaranteed, 1 burst, a pod of 2 GPUs, a person per role; rival and its owner."""
    acme, rival = tenant_on("acme"), tenant_on("rival")
    for role in ("owner", "member", "viewer", "billing"):
        make_user(role)
        members.add_member(actor=ADMIN, tenant=acme, username=role, role=role)
    make_user("stranger")
    members.add_member(actor=ADMIN, tenant=rival, username="stranger", role="owner")
    gpu_class = GpuClass.objects.get(name=H100)
    quotas.set_quota(actor=ADMIN, tenant=acme, gpu_class=gpu_class, guaranteed=1, burst=1)
    rates.create_rate_card(
        actor=ADMIN,
        effective_from=timezone.now() - timedelta(days=1),
        prices={H100: "2.00"},
        tier_multipliers={"standard": "1.5"},
    )
    make_pod("train", "tenant-acme", H100, "h100-0", [0, 1], timezone.now() - timedelta(hours=1), tenant=acme)
    return acme


def standing(api, username: str, slug: str = "acme"):
    return api(User.objects.get(username=username)).get(f"/api/v1/tenants/{slug}/standing/")


@pytest.mark.parametrize("role", ["member", "viewer"])
def test_members_and_viewers_see_the_standing_without_money(acme, api, role):
    response = standing(api, role)
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["tenant"] == "acme"
    assert not MONEY & body.keys()
    (row,) = body["classes"]
    assert row == {
        "gpu_class": H100, "guaranteed": 1, "burst": 1, "lendable": None,
        "in_use": 2, "borrowed": 1, "lent": 0,
    }  # fmt: skip
    (pod,) = body["workloads"]
    assert pod["name"] == "train"
    assert pod["units"] == 2
    assert "cost" not in pod


@pytest.mark.parametrize("role", ["owner", "billing"])
def test_owners_and_billing_see_the_cost_at_the_tenants_rate(acme, api, role):
    body = standing(api, role).json()
    assert body["currency"] == "USD"
    assert Decimal(body["spent_this_month"]) == 0
    (row,) = body["classes"]
    assert Decimal(row["price_per_hour"]) == Decimal("3.00")  # 2.00 × the standard tier's 1.5
    assert Decimal(row["cost_per_hour"]) == Decimal("6.00")  # 2 H100 in use
    assert Decimal(body["workloads"][0]["cost"]) == 0  # nothing metered yet


def test_another_tenants_standing_is_not_found(acme, api):
    assert standing(api, "stranger").status_code == 404
    assert standing(api, "owner", slug="rival").status_code == 404
    assert standing(api, "stranger", slug="rival").status_code == 200


def test_someone_not_signed_in_is_refused(acme, api):
    assert api(None).get("/api/v1/tenants/acme/standing/").status_code == 401
