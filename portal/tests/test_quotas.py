"""The Quotas tab: editing a quota opens with its values, so changing one field changes only that field."""

from __future__ import annotations

from core.audit import Actor
from fleet.models import GpuClass
from placement.dedication import dedicate_nodes
from portal.tests.html import form
from tenants.models import Quota
from tenants.services import lifecycle, quotas

URL = "/tenants/tenant-a/quotas/"


def test_the_edit_form_opens_with_the_quotas_values(client, people):
    h200 = GpuClass.objects.get(name="h200-141gb")
    quotas.set_quota(
        actor=Actor.of(people["admin"]),
        tenant=people["a"],
        gpu_class=h200,
        guaranteed=8,
        burst=4,
        lendable=2,
        weight=3,
    )
    client.force_login(people["admin"])
    values, _ = form(client.get(URL, {"class": "h200-141gb"}).content, "set-quota")
    assert values["gpu_class"] == "h200-141gb"
    assert (values["guaranteed"], values["burst"]) == ("8", "4")
    assert (values["lendable"], values["weight"]) == ("2", "3")


def test_changing_only_the_burst_keeps_the_guarantee_lendable_and_weight(client, people):
    h200 = GpuClass.objects.get(name="h200-141gb")
    admin = Actor.of(people["admin"])
    quotas.set_quota(
        actor=admin, tenant=people["a"], gpu_class=h200, guaranteed=8, burst=4, lendable=2, weight=3
    )
    client.force_login(people["admin"])
    values, _ = form(client.get(URL, {"class": "h200-141gb"}).content, "set-quota")
    response = client.post(URL, {**values, "burst": "6"})
    assert response.status_code == 302

    quota = Quota.objects.get(tenant=people["a"], gpu_class=h200)
    assert quota.burst == 6
    assert (quota.guaranteed, quota.lendable, quota.weight) == (8, 2, 3)


def test_a_quota_with_all_of_its_guarantee_lendable_opens_with_lendable_blank(client, people):
    h200 = GpuClass.objects.get(name="h200-141gb")
    quotas.set_quota(actor=Actor.of(people["admin"]), tenant=people["a"], gpu_class=h200, guaranteed=8)
    client.force_login(people["admin"])
    values, _ = form(client.get(URL, {"class": "h200-141gb"}).content, "set-quota")
    client.post(URL, {**values, "weight": "2"})
    quota = Quota.objects.get(tenant=people["a"], gpu_class=h200)
    assert (quota.guaranteed, quota.lendable, quota.weight) == (8, None, 2)


def test_an_isolated_tenant_sees_its_dedicated_nodes_and_the_api_lists_them(client, people, api):
    tenant = people["a"]
    lifecycle.update_tenant(actor=Actor.of(people["admin"]), tenant=tenant, trust_tier="isolated")
    h200 = GpuClass.objects.get(name="h200-141gb")
    quotas.set_quota(actor=Actor.of(people["admin"]), tenant=tenant, gpu_class=h200, guaranteed=8)
    client.force_login(people["alice"])
    assert "No node is dedicated yet" in client.get(URL).content.decode()

    [(node, _)] = dedicate_nodes(tenant.cluster.host_cluster).carved

    page = client.get(URL).content.decode()
    assert "Dedicated nodes" in page
    assert f"<code>{node}</code>" in page
    body = api(people["alice"]).get("/api/v1/tenants/tenant-a/").json()
    assert body["dedicated_nodes"] == [node]
    assert api(people["charlie"]).get("/api/v1/tenants/tenant-a/").status_code == 404
