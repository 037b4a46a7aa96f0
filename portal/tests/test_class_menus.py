"""Every GPU-class menu offers what can be had: classes of models in service in the fleet, that the tenant's
trust tier allows (`tenants.capacity.classes_offered`, the one selector of every form)."""

from __future__ import annotations

from core.audit import Actor
from fleet.models import Gpu, GpuClass, Node
from portal.tests.html import form
from tenants.models import Tenant
from tenants.services import quotas


def test_the_new_tenant_menu_lists_only_models_the_fleet_has(client, admin, demo_fleet):
    client.force_login(admin)
    _, options = form(client.get("/tenants/new/").content, "create-tenant")
    offered = set(options["gpu_class"]) - {""}
    assert GpuClass.objects.count() == 44
    assert {"h200-141gb", "a100-80gb", "h200-141gb.mig-1g.18gb", "a100-80gb.shared"} <= offered
    assert not [name for name in offered if name.startswith(("b200", "h100", "l40s"))]
    models = {c.gpu_model.slug for c in GpuClass.objects.filter(name__in=offered).select_related("gpu_model")}
    assert models == {"h200-141gb", "a100-80gb"}


def test_the_new_tenant_menu_says_which_tiers_may_hold_each_kind(client, admin, demo_fleet):
    client.force_login(admin)
    page = client.get("/tenants/new/").content.decode()
    assert 'optgroup label="Whole GPUs: every trust tier"' in page
    assert 'optgroup label="MIG slices: standard and trusted tenants"' in page
    assert 'optgroup label="Time-sliced shares: trusted tenants"' in page


def test_the_quota_menu_offers_only_what_the_tenants_tier_allows(client, admin, make_tenant):
    make_tenant("solo", trust_tier=Tenant.TrustTier.ISOLATED)
    client.force_login(admin)
    _, options = form(client.get("/tenants/solo/quotas/").content, "set-quota")
    assert set(options["gpu_class"]) - {""} == {"h200-141gb", "a100-80gb"}


def test_the_quota_menu_leaves_out_a_model_whose_gpus_are_all_out_of_service(client, admin, make_tenant):
    make_tenant("vision")
    Gpu.objects.filter(gpu_model__slug="a100-80gb").update(health=Gpu.Health.QUARANTINED)
    Node.objects.filter(gpus__gpu_model__slug="h200-141gb").update(state=Node.State.QUARANTINED)
    client.force_login(admin)
    _, options = form(client.get("/tenants/vision/quotas/").content, "set-quota")
    assert options["gpu_class"] == [""]


def test_a_class_the_tenant_holds_stays_in_the_menu_to_be_edited(client, admin, make_tenant):
    tenant = make_tenant("vision")
    a100 = GpuClass.objects.get(name="a100-80gb")
    quotas.set_quota(actor=Actor.of(admin), tenant=tenant, gpu_class=a100, guaranteed=2)
    Gpu.objects.filter(gpu_model__slug="a100-80gb").update(health=Gpu.Health.QUARANTINED)
    client.force_login(admin)
    values, options = form(client.get("/tenants/vision/quotas/?class=a100-80gb").content, "set-quota")
    assert "a100-80gb" in options["gpu_class"]
    assert values["gpu_class"] == "a100-80gb"


def test_the_what_if_menu_lists_only_models_the_fleet_has(client, admin, demo_fleet):
    client.force_login(admin)
    _, options = form(client.get("/capacity/").content, "what-if")
    models = {
        c.gpu_model.slug
        for c in GpuClass.objects.filter(name__in=options["gpu_class"]).select_related("gpu_model")
    }
    assert models == {"h200-141gb", "a100-80gb"}
