from tenants.models import Tenant


def test_signing_in_shows_only_ones_own_tenants(client, people):
    assert client.get("/").status_code == 302  # to the sign-in page
    response = client.post("/login/", {"username": "alice", "password": "pw-alice"})
    assert response.status_code == 302

    page = client.get("/").content.decode()
    assert "tenant-a" in page
    assert "tenant-b" not in page


def test_a_wrong_password_is_refused_with_a_message(client, people):
    response = client.post("/login/", {"username": "alice", "password": "nope"})
    assert response.status_code == 200
    assert "do not match" in response.content.decode()


def test_the_tenant_page_shows_cluster_state_and_quotas(client, people):
    Tenant.objects.filter(pk=people["a"].pk).update(state="ready")
    client.force_login(people["bob"])
    page = client.get("/tenants/tenant-a/").content.decode()
    assert "tenant-a" in page
    assert "Quotas" in page
    assert "tenant-tenant-a" in page


def test_another_tenants_page_is_not_found(client, people):
    client.force_login(people["charlie"])
    assert client.get("/tenants/tenant-a/").status_code == 404
