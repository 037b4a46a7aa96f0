"""Trust tiers decide which kinds of GPU class a tenant may hold (tenants/tiers.py): isolated tenants whole
GPUs only, standard tenants also MIG slices, trusted tenants also shared GPUs. Admission, trust-tier changes
and what-if apply the same rule."""

import pytest

from core.audit import Actor
from fleet.models import GpuClass
from gpucloud.errors import Conflict, TierForbidsClass
from tenants.models import Quota, Tenant
from tenants.services import lifecycle, quotas

WHOLE, MIG, SHARED = "h200-141gb", "h200-141gb.mig-1g.18gb", "h200-141gb.shared"


def set_quota(admin, tenant, name, guaranteed=1):
    gpu_class = GpuClass.objects.get(name=name)
    return quotas.set_quota(actor=Actor.of(admin), tenant=tenant, gpu_class=gpu_class, guaranteed=guaranteed)


@pytest.mark.parametrize(
    ("tier", "allowed", "refused"),
    [
        ("isolated", [WHOLE], [MIG, SHARED]),
        ("standard", [WHOLE, MIG], [SHARED]),
        ("trusted", [WHOLE, MIG, SHARED], []),
    ],
)
def test_each_tier_is_admitted_only_the_classes_it_allows(admin, make_tenant, tier, allowed, refused):
    tenant = make_tenant("team", trust_tier=tier)
    for name in allowed:
        set_quota(admin, tenant, name)
    for name in refused:
        with pytest.raises(TierForbidsClass) as refusal:
            set_quota(admin, tenant, name)
        assert f"tenant team ({tier}) may not hold {name}" in refusal.value.detail
        assert "isolated tenants get whole GPUs only" in refusal.value.detail
        assert refusal.value.errors["gpu_class"]
        assert refusal.value.extra["trust_tier"] == tier
    assert sorted(Quota.objects.filter(tenant=tenant).values_list("gpu_class__name", flat=True)) == allowed


def test_setting_a_mig_quota_on_an_isolated_tenant_is_a_422_naming_the_rule(api, admin, make_tenant):
    make_tenant("solo", trust_tier="isolated")

    response = api(admin).put(f"/api/v1/tenants/solo/quotas/{MIG}/", {"guaranteed": 7}, format="json")

    assert response.status_code == 422, response.json()
    body = response.json()
    assert body["type"] == "/problems/trust-tier-forbids-class"
    assert (body["trust_tier"], body["gpu_class"], body["allowed_kinds"]) == ("isolated", MIG, ["whole"])
    assert "isolated tenants get whole GPUs only" in body["detail"]
    assert not Quota.objects.exists()


def test_a_tier_cannot_drop_below_the_quotas_the_tenant_holds(admin, make_tenant):
    tenant = make_tenant("team", trust_tier="trusted")
    set_quota(admin, tenant, WHOLE)
    set_quota(admin, tenant, MIG)
    shared, _ = set_quota(admin, tenant, SHARED, guaranteed=0)  # a burst-only quota still reaches the class
    as_admin = Actor.of(admin)

    with pytest.raises(Conflict) as refusal:
        lifecycle.update_tenant(actor=as_admin, tenant=tenant, trust_tier="isolated")
    assert refusal.value.extra["quotas"] == [MIG, SHARED]
    assert "remove those quotas first" in refusal.value.detail
    with pytest.raises(Conflict):
        lifecycle.update_tenant(actor=as_admin, tenant=tenant, trust_tier="standard")
    assert Tenant.objects.get(pk=tenant.pk).trust_tier == "trusted"

    quotas.remove_quota(actor=as_admin, quota=shared)
    assert (
        lifecycle.update_tenant(actor=as_admin, tenant=tenant, trust_tier="standard").trust_tier == "standard"
    )


def test_a_tier_downgrade_under_quotas_is_a_409_through_the_api(api, admin, make_tenant):
    tenant = make_tenant("team")
    set_quota(admin, tenant, MIG)

    response = api(admin).patch("/api/v1/tenants/team/", {"trust_tier": "isolated"}, format="json")

    assert response.status_code == 409
    assert response.json()["quotas"] == [MIG]
    assert response.json()["errors"]["trust_tier"]


def test_what_if_refuses_by_the_same_rule(api, admin, make_tenant):
    make_tenant("solo", trust_tier="isolated")
    client = api(admin)

    named = client.post(
        "/api/v1/fleet/what-if/",
        {"quotas": [{"tenant": "solo", "gpu_class": MIG, "guaranteed": 1}]},
        format="json",
    )
    new = client.post(
        "/api/v1/fleet/what-if/",
        {"quotas": [{"trust_tier": "standard", "gpu_class": SHARED, "guaranteed": 1}]},
        format="json",
    )

    assert named.status_code == new.status_code == 422
    assert named.json()["type"] == new.json()["type"] == "/problems/trust-tier-forbids-class"
    assert "tenant solo (isolated) may not hold" in named.json()["errors"]["quotas[0].gpu_class"][0]
    assert "a standard tenant may not hold h200-141gb.shared" in new.json()["detail"]
