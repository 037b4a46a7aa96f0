"""Password sign-in at /login/: lock-outs per account and address, audited failures, no other way in."""

from __future__ import annotations

from tenants.models import AuditEvent


def sign_in(client, username: str, password: str, address: str = "10.0.0.7") -> int:
    return client.post(
        "/login/", {"username": username, "password": password}, REMOTE_ADDR=address
    ).status_code


def test_a_locked_out_account_does_not_lock_out_others_at_the_same_address(client, make_user, settings):
    make_user("alice"), make_user("bob")
    settings.LOGIN_ATTEMPTS = 10

    answers = [sign_in(client, "alice", "wrong") for _ in range(11)]

    assert answers == [200] * 10 + [429]
    assert sign_in(client, "alice", "pw-alice") == 429  # alice is locked out from this address…
    assert sign_in(client, "alice", "pw-alice", address="10.0.0.8") == 302  # …not from another one
    assert sign_in(client.__class__(), "bob", "pw-bob") == 302  # and bob, at the same address, signs in


def test_an_address_trying_many_accounts_meets_a_ceiling(client, make_user, settings):
    make_user("alice")
    settings.LOGIN_ATTEMPTS, settings.LOGIN_ATTEMPTS_PER_ADDRESS = 3, 5

    answers = [sign_in(client, f"user{i}", "Summer2026!") for i in range(6)]

    assert answers == [200] * 5 + [429]
    assert sign_in(client, "alice", "pw-alice") == 429
    assert sign_in(client, "alice", "pw-alice", address="10.0.0.8") == 302


def test_a_right_password_clears_the_accounts_failures(client, make_user, settings):
    make_user("alice")
    settings.LOGIN_ATTEMPTS = 3
    assert [sign_in(client, "alice", "wrong") for _ in range(2)] == [200, 200]
    assert sign_in(client, "alice", "pw-alice") == 302
    client.logout()

    assert [sign_in(client, "alice", "wrong") for _ in range(3)] == [200, 200, 200]


def test_a_failed_sign_in_is_audited_with_the_name_tried_and_the_address(client, make_user):
    make_user("alice")

    sign_in(client, "alice", "wrong")

    row = AuditEvent.objects.get(action="user.sign_in_failed")
    assert row.object_id == "alice" and row.actor_label == "anonymous" and row.source_ip == "10.0.0.7"
    assert row.after["method"] == "password" and "do not match" in row.after["reason"]


def test_there_is_no_django_admin_site_to_sign_in_through(client, make_user):
    make_user("alice", staff=True)

    assert client.get("/admin/").status_code == 404
    assert client.post("/admin/login/", {"username": "alice", "password": "pw-alice"}).status_code == 404
    assert "_auth_user_id" not in client.session
