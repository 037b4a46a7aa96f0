"""One answer to "you are in this tenant, but your role may not read this", whatever the door: 403 naming
the roles that may, in the same words in the API and the portal; another tenant stays 404
(`tenants.selectors`)."""

from __future__ import annotations

import html

import pytest

from billing.services import invoicing
from core.audit import Actor
from tenants.services import members

USAGE = "billing.view needs one of these roles in tenant tenant-a: admin, billing, owner"
AUDIT = "audit.view needs one of these roles in tenant tenant-a: admin, owner"


@pytest.fixture
def mia(people, make_user):
    """A member (the role that runs workloads) of tenant A, and nothing else."""
    user = make_user("mia")
    members.add_member(actor=Actor.of(people["admin"]), tenant=people["a"], username="mia", role="member")
    return user


def portal_refusal(client, url: str) -> tuple[int, str]:
    response = client.get(url)
    page = html.unescape(response.content.decode())
    return response.status_code, page


def test_a_member_asking_for_usage_is_told_the_roles_by_the_api_and_the_portal_alike(api, client, mia):
    response = api(mia).get("/api/v1/usage/", {"tenant": "tenant-a"})
    assert response.status_code == 403
    assert response.json()["detail"] == USAGE
    assert response.json()["allowed_roles"] == ["admin", "billing", "owner"]

    client.force_login(mia)
    status, page = portal_refusal(client, "/tenants/tenant-a/usage/")
    assert status == 403
    assert USAGE in page


def test_a_member_asking_for_the_audit_log_is_told_the_roles_by_the_api_and_the_portal_alike(
    api, client, mia
):
    response = api(mia).get("/api/v1/audit-events/", {"tenant": "tenant-a"})
    assert response.status_code == 403
    assert response.json()["detail"] == AUDIT

    client.force_login(mia)
    status, page = portal_refusal(client, "/tenants/tenant-a/audit/")
    assert status == 403
    assert AUDIT in page


def test_a_member_listing_across_tenants_is_refused_rather_than_given_an_empty_list(api, mia):
    for url in ("/api/v1/audit-events/", "/api/v1/usage/", "/api/v1/invoices/", "/api/v1/budgets/"):
        response = api(mia).get(url)
        assert response.status_code == 403, url
        assert "needs one of these roles in a tenant" in response.json()["detail"], url


def test_someone_in_no_tenant_gets_an_empty_list_not_a_refusal(api, make_user, people):
    loner = make_user("loner")
    response = api(loner).get("/api/v1/audit-events/")
    assert response.status_code == 200
    assert response.json()["count"] == 0


def test_another_tenant_stays_not_found_through_both_doors(api, client, people):
    charlie = people["charlie"]
    assert api(charlie).get("/api/v1/usage/", {"tenant": "tenant-a"}).status_code == 404
    assert api(charlie).get("/api/v1/audit-events/", {"tenant": "tenant-a"}).status_code == 404
    client.force_login(charlie)
    assert client.get("/tenants/tenant-a/usage/").status_code == 404
    assert client.get("/tenants/tenant-a/audit/").status_code == 404


def test_a_member_of_one_tenant_and_billing_of_another_is_told_which_tenant_refuses(api, people, mia):
    admin = Actor.of(people["admin"])
    members.add_member(actor=admin, tenant=people["b"], username="mia", role="billing")
    invoice = invoicing.draft_invoice(actor=admin, tenant=people["a"], year=2026, month=11)
    other = invoicing.draft_invoice(actor=admin, tenant=people["b"], year=2026, month=11)

    listed = api(mia).get("/api/v1/invoices/")
    assert listed.status_code == 200
    assert [i["id"] for i in listed.json()["results"]] == [other.public_id]
    refused = api(mia).get(f"/api/v1/invoices/{invoice.public_id}/")
    assert refused.status_code == 403
    assert refused.json()["detail"] == USAGE
    assert api(people["charlie"]).get(f"/api/v1/invoices/{invoice.public_id}/").status_code == 404
