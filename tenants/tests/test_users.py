"""Local accounts made by platform administrators: the password shown once, every change audited."""

import pytest
from django.contrib.auth.models import User

from core.audit import Actor
from core.models import AuditEvent
from gpucloud.errors import Conflict, PermissionDenied, ValidationFailed
from tenants import tokens, users


def test_an_administrator_makes_an_account_whose_generated_password_works_once_shown(admin, client):
    user, secret = users.create_local_user(actor=Actor.of(admin), username="judy", email="judy@example.com")
    assert secret
    assert not User.objects.filter(password=secret).exists()  # only the hash is kept
    assert client.login(username="judy", password=secret)
    assert AuditEvent.objects.filter(action="user.create", object_id="judy").exists()

    new = users.reset_password(actor=Actor.of(admin), user=user)
    assert new != secret
    assert client.login(username="judy", password=new)
    assert not client.login(username="judy", password=secret)


def test_accounts_are_made_and_changed_by_platform_administrators_only(people):
    with pytest.raises(PermissionDenied):
        users.create_local_user(actor=Actor.of(people["alice"]), username="mallory")
    with pytest.raises(PermissionDenied):
        users.set_active(actor=Actor.of(people["alice"]), user=people["bob"], active=False)


def test_bad_usernames_weak_passwords_and_duplicates_are_refused_with_reasons(admin):
    actor = Actor.of(admin)
    with pytest.raises(ValidationFailed, match="is not a username"):
        users.create_local_user(actor=actor, username="two words")
    with pytest.raises(ValidationFailed) as weak:
        users.create_local_user(actor=actor, username="kim", password="123")
    assert weak.value.errors["password"]
    with pytest.raises(Conflict, match="already an account"):
        users.create_local_user(actor=actor, username="admin")


def test_a_deactivated_account_cannot_sign_in_and_nobody_deactivates_themselves(admin, people, client):
    users.set_active(actor=Actor.of(admin), user=people["bob"], active=False)
    assert not client.login(username="bob", password="pw-bob")
    assert AuditEvent.objects.filter(action="user.deactivate", object_id="bob").exists()
    with pytest.raises(Conflict, match="your own account"):
        users.set_active(actor=Actor.of(admin), user=admin, active=False)


def test_deactivating_an_account_revokes_its_tokens_and_ends_its_sessions_at_once(admin, people, client, api):
    bob = people["bob"]
    _, token = tokens.create_token(actor=Actor.of(bob), user=bob, name="laptop", scope="read")
    client.force_login(bob)
    assert client.get("/", follow=False).status_code == 200

    users.set_active(actor=Actor.of(admin), user=bob, active=False)

    assert client.get("/", follow=False).status_code == 302
    answer = api(None).get("/api/v1/tenants/", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert answer.status_code == 401
    assert "revoked" in answer.json()["detail"]
    row = AuditEvent.objects.get(action="user.deactivate", object_id="bob")
    assert row.after == {"active": False, "tokens_revoked": 1, "sessions_ended": 1}
    users.set_active(actor=Actor.of(admin), user=bob, active=True)
    assert api(None).get("/api/v1/tenants/", HTTP_AUTHORIZATION=f"Bearer {token}").status_code == 401
