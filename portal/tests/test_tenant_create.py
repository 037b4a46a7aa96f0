"""The New tenant page: platform administrators only, refused before anyone fills it in."""

from __future__ import annotations

from tenants.models import Tenant


def test_a_member_is_refused_the_form_before_filling_it_in(client, people):
    client.force_login(people["alice"])  # owner of tenant-a, not a platform administrator
    response = client.get("/tenants/new/")
    assert response.status_code == 403
    page = response.content.decode()
    assert "creating a tenant needs a platform administrator" in page
    assert 'name="slug"' not in page


def test_a_viewer_posting_the_form_anyway_is_refused_and_nothing_is_made(client, people):
    client.force_login(people["bob"])
    response = client.post("/tenants/new/", {"slug": "sneaky", "trust_tier": "standard"})
    assert response.status_code == 403
    assert not Tenant.objects.filter(slug="sneaky").exists()


def test_a_platform_administrator_gets_the_form(client, admin, demo_fleet):
    client.force_login(admin)
    response = client.get("/tenants/new/")
    assert response.status_code == 200
    assert 'name="slug"' in response.content.decode()
