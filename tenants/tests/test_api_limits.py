"""The limits of tenants and quotas, declared once on the model, hold in the API with the allowed range named
— on PostgreSQL, where a value over a column's size used to fail as a 500."""

from __future__ import annotations

import pytest

from tenants.models import Quota, Tenant


def test_a_display_name_over_200_characters_is_refused_naming_the_limit(api, admin, demo_fleet):
    client = api(admin)
    client.post("/api/v1/tenants/", {"slug": "vision"}, format="json")

    renamed = client.patch("/api/v1/tenants/vision/", {"display_name": "n" * 201}, format="json")
    assert renamed.status_code == 400
    assert "200 characters" in renamed.json()["errors"]["display_name"][0]
    huge = client.post("/api/v1/tenants/", {"slug": "huge", "display_name": "n" * 1_000_000}, format="json")
    assert huge.status_code == 400
    assert "200 characters" in huge.json()["errors"]["display_name"][0]
    assert Tenant.objects.get(slug="vision").display_name == "vision"
    assert not Tenant.objects.filter(slug="huge").exists()


def test_a_slug_with_a_trailing_newline_is_refused_not_trimmed(api, admin, demo_fleet):
    response = api(admin).post("/api/v1/tenants/", {"slug": "ab\n"}, format="json")
    assert response.status_code == 400
    assert "slug" in response.json()["errors"]
    assert not Tenant.objects.filter(slug__startswith="ab").exists()


@pytest.mark.parametrize("value", [2**31, 10**20])
@pytest.mark.parametrize(("field", "low"), [("burst", 0), ("weight", 1), ("guaranteed", 0), ("lendable", 0)])
def test_a_quota_number_beyond_the_column_is_a_400_naming_the_range(
    api, admin, demo_fleet, field, low, value
):
    client = api(admin)
    client.post("/api/v1/tenants/", {"slug": "vision"}, format="json")
    response = client.put(
        "/api/v1/tenants/vision/quotas/h200-141gb/", {"guaranteed": 0, field: value}, format="json"
    )
    assert response.status_code == 400, response.content[:300]
    assert response.json()["errors"][field] == [f"must be a whole number from {low} to 2147483647"]
    assert not Quota.objects.exists()
