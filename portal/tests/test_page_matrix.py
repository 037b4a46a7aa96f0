"""Every portal page of a tenant, walked from the URL configuration: another tenant's member gets 404 for each
(as the API answers), anonymous callers are sent to sign in, and the tenant's own owner is let in."""

from __future__ import annotations

import re

from django.urls import URLPattern, reverse

from core.audit import Actor
from portal import urls
from tenants.models import Tenant, TenantCluster
from tenants.tokens import create_service_token

VALUES = {
    "slug": "tenant-a",
    "gpu_class": "h200-141gb",
    "username": "bob",
    "invitation_id": 1,
    "invoice_id": "inv_x",
    "what": "csv",
    "month": "2026-11",
}


def tenant_pages() -> list[tuple[str | None, str]]:
    pages = []
    for pattern in urls.urlpatterns:
        assert isinstance(pattern, URLPattern)
        names = re.findall(r"<(?:\w+:)?(\w+)>", str(pattern.pattern))
        if "slug" in names:
            pages.append(
                (pattern.name, reverse(f"portal:{pattern.name}", kwargs={n: VALUES[n] for n in names}))
            )
    return pages


def test_every_tenant_page_is_not_found_to_another_tenants_owner(client, people):
    client.force_login(people["charlie"])
    pages = tenant_pages()
    assert len(pages) > 15
    wrong = []
    for name, url in pages:
        status = client.get(url).status_code
        if status == 405:  # a button's address: it takes POST only
            status = client.post(url).status_code
        if status != 404:
            wrong.append(f"{name} {url}: {status}")
    assert not wrong, "\n".join(wrong)


def test_every_tenant_page_sends_anonymous_callers_to_sign_in(client, people):
    for name, url in tenant_pages():
        response = client.get(url)
        assert response.status_code == 302, name
        assert response["Location"].startswith("/login/"), name


def test_the_owner_reads_every_page_of_the_tenant(client, people):
    Tenant.objects.filter(pk=people["a"].pk).update(state=Tenant.State.READY)
    TenantCluster.objects.filter(tenant=people["a"]).update(
        state=TenantCluster.State.READY, endpoint="https://x"
    )
    client.force_login(people["alice"])
    readable = ["tenant-detail", "tenant-status", "tenant-kubeconfig", "tenant-quotas", "tenant-members"]
    readable += ["tenant-kubeconfig-admin"]
    readable += ["tenant-workloads", "tenant-standing", "tenant-usage", "tenant-invoices", "tenant-tokens"]
    readable += ["tenant-audit"]
    readable += ["tenant-queue"]
    for name in readable:
        assert client.get(reverse(f"portal:{name}", kwargs={"slug": "tenant-a"})).status_code == 200, name


def test_another_tenants_token_cannot_be_revoked_from_the_portal(client, people):
    row, _ = create_service_token(
        actor=Actor.of(people["alice"]),
        tenant=people["a"],
        name="gitops",
    )
    client.force_login(people["charlie"])
    assert client.post(reverse("portal:token-revoke", kwargs={"token_id": row.public_id})).status_code == 404
    row.refresh_from_db()
    assert row.revoked_at is None
