"""Platform › host clusters in the portal: cordon, drain (preview, then for real), update, retire and
un-retire, and delete, each with its message, through the same services as the API (clusters/lifecycle.py);
and the fleet page without a retired host cluster."""

from __future__ import annotations

from clusters.tests.conftest import kubeconfig_for
from core.models import AuditEvent
from fleet.models import HostCluster
from portal.forms import DrainForm
from tenants.models import Tenant, TenantCluster

BASE = "/host-clusters/gpu-east/"


def said(response) -> list[str]:
    """The messages the page the action led back to shows."""
    return [str(m) for m in response.context["messages"]]


def test_an_administrator_cordons_drains_and_deletes_a_host_cluster_from_the_page(
    client, host, demo_fleet, admin, make_tenant
):
    client.force_login(admin)
    make_tenant("vision", host_cluster=host)
    page = client.get("/host-clusters/").content.decode()
    assert "Manage gpu-east" in page
    assert 'data-confirm="Delete gpu-east?' in page

    cordoned = client.post(BASE + "cordon/", {"gpu-east-reason": "refresh"}, follow=True)
    assert said(cordoned) == ["Host cluster gpu-east is cordoned: it takes no new tenants."]
    assert HostCluster.objects.get(pk=host.pk).cordon_reason == "refresh"
    assert "cordoned</span> refresh" in client.get("/host-clusters/").content.decode()

    refused = client.post(BASE + "delete/", follow=True)
    assert said(refused) == [
        "gpu-east: host cluster gpu-east still runs tenants vision: drain it (or delete them) first"
    ]

    preview = client.post(BASE + "drain/", {"gpu-east-preview": "on"}, follow=True)
    assert said(preview) == ["Drain of gpu-east (preview, nothing changed): would move vision to demo."]
    assert TenantCluster.objects.get(tenant__slug="vision").host_cluster == host
    drained = client.post(BASE + "drain/", {"gpu-east-target": "demo"}, follow=True)
    assert said(drained) == ["Drain of gpu-east: moved vision to demo."]

    deleted = client.post(BASE + "delete/", follow=True)
    assert said(deleted) == ["Host cluster gpu-east deleted."]
    assert not HostCluster.objects.filter(name="gpu-east").exists()
    assert AuditEvent.objects.get(action="host_cluster.delete").actor == admin


def test_a_rotated_kubeconfig_is_checked_and_a_bad_one_refused_with_the_reason(
    client, host, kube_emulator, admin
):
    client.force_login(admin)
    bad = client.post(BASE + "update/", {"gpu-east-kubeconfig": "clusters: ["}, follow=True)
    assert "the kubeconfig is not valid YAML" in said(bad)[0]
    good = client.post(
        BASE + "update/", {"gpu-east-kubeconfig": kubeconfig_for(kube_emulator.url)}, follow=True
    )
    assert said(good) == ["Host cluster gpu-east updated."]


def test_only_platform_administrators_change_host_clusters_from_the_portal(client, host, make_user):
    client.force_login(make_user("alice"))
    assert client.post(BASE + "cordon/").status_code == 403
    assert not HostCluster.objects.get(pk=host.pk).cordoned


def test_an_administrator_retires_and_unretires_a_host_cluster_from_the_page(
    client, small_fleet, admin, make_tenant
):
    client.force_login(admin)
    tenant = make_tenant("vision", host_cluster=small_fleet)
    page = client.get("/host-clusters/").content.decode()
    assert 'data-confirm="Retire small?' in page

    refused = client.post(
        "/host-clusters/small/retire/", {"small-retire_reason": "end of lease"}, follow=True
    )
    assert said(refused) == [
        "small: host cluster small still runs tenants vision: drain it (or delete them) first"
    ]
    Tenant.objects.filter(pk=tenant.pk).update(state=Tenant.State.DELETED)
    retired = client.post(
        "/host-clusters/small/retire/", {"small-retire_reason": "end of lease"}, follow=True
    )
    assert said(retired) == ["Host cluster small is retired: out of service, its history kept."]
    host_cluster = HostCluster.objects.get(pk=small_fleet.pk)
    assert (host_cluster.state, host_cluster.cordon_reason) == ("retired", "end of lease")
    page = retired.content.decode()
    assert '<span class="state state-deleted">retired</span>' in page
    assert 'data-confirm="Un-retire small?' in page
    assert 'data-confirm="Retire small?' not in page

    back = client.post("/host-clusters/small/unretire/", follow=True)
    assert said(back) == [
        "Host cluster small is back in service, still cordoned: uncordon it to take tenants."
    ]
    assert HostCluster.objects.get(pk=small_fleet.pk).state == "ready"
    actions = AuditEvent.objects.filter(object_id=small_fleet.public_id).values_list("action", flat=True)
    assert {"host_cluster.retire", "host_cluster.unretire"} <= set(actions)


def test_the_fleet_page_neither_draws_nor_counts_a_retired_host_clusters_gpus(client, small_fleet, admin):
    client.force_login(admin)
    before = client.get("/fleet/")
    assert dict(before.context["counts"])["free"] == 112  # demo's 104 and small's 8
    HostCluster.objects.filter(pk=small_fleet.pk).update(state=HostCluster.State.RETIRED)

    after = client.get("/fleet/")

    assert dict(after.context["counts"])["free"] == 104
    assert [hc.name for hc, _, _ in after.context["clusters"]] == ["demo"]
    assert 'Retired, not shown or counted: <a href="/host-clusters/#hc-small">small</a>' in (
        after.content.decode()
    )
    form = DrainForm(exclude="demo")
    assert [value for value, _ in form["target"].field.widget.choices] == [""]  # small is retired
