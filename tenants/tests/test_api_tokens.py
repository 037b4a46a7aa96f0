"""/api/v1/tokens/ and /api/v1/tenants/{slug}/tokens/: scopes, expiry, last use, revocation, audit."""

from datetime import timedelta

from django.utils import timezone

from core.audit import Actor
from core.models import AuditEvent
from tenants.models import ApiToken, Membership
from tenants.tokens import create_token


def bearer(client, token):
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


def test_a_personal_token_is_shown_once_and_listed_without_its_secret(api, people):
    client = api(people["alice"])
    created = client.post("/api/v1/tokens/", {"name": "laptop", "scope": "read"}, format="json")

    assert created.status_code == 201
    token = created.json()["token"]
    listed = client.get("/api/v1/tokens/").json()["results"]
    laptop = next(t for t in listed if t["name"] == "laptop")
    assert laptop["scope"] == "read"
    assert laptop["prefix"] == token[4:12]
    assert "token" not in laptop
    assert token not in str(listed)
    assert AuditEvent.objects.filter(action="token.create", object_id=laptop["id"]).exists()


def test_a_read_token_can_read_but_cannot_change_anything(api, people, client):
    _, token = create_token(actor=Actor.of(people["alice"]), user=people["alice"], name="ro", scope="read")
    reader = bearer(api(None), token)

    assert reader.get("/api/v1/tenants/tenant-a/").status_code == 200
    for method, url in [
        ("patch", "/api/v1/tenants/tenant-a/"),
        ("post", "/api/v1/tenants/tenant-a/suspend/"),
        ("delete", "/api/v1/tenants/tenant-a/members/bob/"),
        ("post", "/api/v1/tokens/"),
    ]:
        response = getattr(reader, method)(url, {"display_name": "x", "name": "x"}, format="json")
        assert response.status_code == 403, (method, url)
        assert "scope 'read'" in response.json()["detail"]


def test_a_write_token_changes_things_but_cannot_manage_people_or_tokens(api, people):
    _, token = create_token(actor=Actor.of(people["alice"]), user=people["alice"], name="rw", scope="write")
    writer = bearer(api(None), token)

    assert writer.patch("/api/v1/tenants/tenant-a/", {"display_name": "A"}, format="json").status_code == 200
    assert writer.delete("/api/v1/tenants/tenant-a/members/bob/").status_code == 403
    assert writer.post("/api/v1/tokens/", {"name": "more"}, format="json").status_code == 403


def test_an_expired_or_revoked_token_is_refused_with_401_and_the_reason(api, people):
    alice = people["alice"]
    row, token = create_token(actor=Actor.of(alice), user=alice, name="short")
    client = bearer(api(None), token)
    ApiToken.objects.filter(pk=row.pk).update(expires_at=timezone.now() - timedelta(minutes=1))

    expired = client.get("/api/v1/tenants/")
    assert expired.status_code == 401
    assert "expired at" in expired.json()["detail"]

    ApiToken.objects.filter(pk=row.pk).update(expires_at=None)
    assert api(alice).delete(f"/api/v1/tokens/{row.public_id}/").json()["revoked_at"]
    revoked = client.get("/api/v1/tenants/")
    assert revoked.status_code == 401
    assert "revoked at" in revoked.json()["detail"]
    assert AuditEvent.objects.filter(action="token.revoke", object_id=row.public_id).exists()


def test_an_expiry_in_the_past_is_refused(api, people):
    response = api(people["alice"]).post(
        "/api/v1/tokens/", {"name": "old", "expires_at": "2001-01-01T00:00:00Z"}, format="json"
    )
    assert response.status_code == 400
    assert "expires_at" in response.json()["errors"]


def test_a_token_records_when_and_from_where_it_was_last_used(api, people):
    row, token = create_token(actor=Actor.of(people["alice"]), user=people["alice"], name="ci")
    bearer(api(None), token).get("/api/v1/tenants/", REMOTE_ADDR="10.1.2.3")

    row.refresh_from_db()
    assert row.last_used_ip == "10.1.2.3"
    assert row.last_used_at is not None


def test_a_service_token_acts_only_in_its_tenant_with_its_scopes_role(api, people):
    created = api(people["alice"]).post(
        "/api/v1/tenants/tenant-a/tokens/", {"name": "terraform", "scope": "write"}, format="json"
    )
    assert created.status_code == 201
    service = bearer(api(None), created.json()["token"])

    assert [t["slug"] for t in service.get("/api/v1/tenants/").json()["results"]] == ["tenant-a"]
    assert service.get("/api/v1/tenants/tenant-b/").status_code == 404
    assert service.get("/api/v1/tenants/tenant-a/members/").status_code == 200
    assert service.post("/api/v1/tokens/", {"name": "x"}, format="json").status_code == 403
    account = ApiToken.objects.get(public_id=created.json()["id"]).user
    assert Membership.objects.get(user=account).role == "member"

    api(people["alice"]).delete(f"/api/v1/tenants/tenant-a/tokens/{created.json()['id']}/")
    assert service.get("/api/v1/tenants/").status_code == 401
    assert not Membership.objects.filter(user=account).exists()


def test_token_endpoints_are_rate_limited(api, people, settings):
    settings.GPUCLOUD_THROTTLE_RATES = {"tokens": "3/min"}
    client = api(people["bob"])
    answers = [client.get("/api/v1/tokens/").status_code for _ in range(4)]
    assert answers == [200, 200, 200, 429]


def test_a_service_token_cannot_make_personal_tokens_whatever_its_scope(api, people):
    created = api(people["alice"]).post(
        "/api/v1/tenants/tenant-a/tokens/", {"name": "gitops", "scope": "admin"}, format="json"
    )
    service = bearer(api(None), created.json()["token"])

    refused = service.post("/api/v1/tokens/", {"name": "escape", "scope": "admin"}, format="json")

    assert refused.status_code == 403, refused.json()
    assert refused.json()["type"].endswith("forbidden")
    assert "service token cannot make personal tokens" in refused.json()["detail"]
    account = ApiToken.objects.get(public_id=created.json()["id"]).user
    assert ApiToken.objects.filter(user=account).count() == 1  # only the service token itself
