"""Password sign-in at /login/: lock-outs per account and address, audited failures, no other way in."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest
import requests

from core.models import AuditEvent
from gpucloud.tests.test_cli import get, gpucloud, process_env, stop, wait_until
from tests.tools import free_port


def sign_in(client, username: str, password: str, address: str = "10.0.0.7") -> int:
    response = client.post("/login/", {"username": username, "password": password}, REMOTE_ADDR=address)
    status: int = response.status_code
    return status


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
    assert row.object_id == "alice"
    assert row.actor_label == "anonymous"
    assert row.source_ip == "10.0.0.7"
    assert row.after["method"] == "password"
    assert "do not match" in row.after["reason"]


def test_there_is_no_django_admin_site_to_sign_in_through(client, make_user):
    make_user("alice", staff=True)

    assert client.get("/admin/").status_code == 404
    assert client.post("/admin/login/", {"username": "alice", "password": "pw-alice"}).status_code == 404
    assert "_auth_user_id" not in client.session


# --- the real web process: several gunicorn workers, one count ----------------------------------------------


@pytest.mark.worker
def test_gunicorns_workers_share_one_lock_out_count_so_only_the_limit_of_wrong_passwords_is_ever_checked(
    fresh_database, tmp_path
):
    env = process_env(DATABASE_URL=fresh_database, GPUCLOUD_WEB_WORKERS="3", GPUCLOUD_METRICS_PORT="0")
    env.pop("GPUCLOUD_CACHE_URL", None)  # the default: the database's cache
    assert gpucloud("migrate", env=env, out=tmp_path / "migrate.log").wait(timeout=300) == 0
    create = ["manage", "createsuperuser", "--noinput", "--username", "alice", "--email", "alice@example.com"]
    made = gpucloud(*create, env=env | {"DJANGO_SUPERUSER_PASSWORD": "pw-alice"}, out=tmp_path / "user.log")
    assert made.wait(timeout=120) == 0, (tmp_path / "user.log").read_text()
    port = free_port()
    web = gpucloud("web", "--bind", f"127.0.0.1:{port}", env=env, out=tmp_path / "web.log")
    login = f"http://127.0.0.1:{port}/login/"
    try:
        wait_until(lambda: get(f"http://127.0.0.1:{port}/healthz") == 200, 60, "the web process answers")
        csrf = str(requests.get(login, timeout=30).cookies["csrftoken"])
        start = threading.Barrier(30)

        def sign_in(password: str) -> int:
            start.wait()
            return requests.post(
                login,
                data={"username": "alice", "password": password, "csrfmiddlewaretoken": csrf},
                cookies={"csrftoken": csrf},
                timeout=120,
            ).status_code

        with ThreadPoolExecutor(30) as clients:
            answers = list(clients.map(sign_in, ["wrong"] * 30))
        start = threading.Barrier(1)
        right_password = sign_in("pw-alice")
    finally:
        stop(web)
    assert sorted(answers) == [200] * 10 + [429] * 20  # ten checked (and refused), twenty never checked
    assert right_password == 429  # alice is locked out from this address for the window
    with psycopg.connect(fresh_database) as conn:
        failures = conn.execute(
            "SELECT count(*) FROM tenants_auditevent WHERE action = 'user.sign_in_failed'"
        )
        assert failures.fetchone() == (10,)
    workers = {
        line.split("pid: ")[1].split()[0]
        for line in (tmp_path / "web.log").read_text().splitlines()
        if "Booting worker with pid" in line
    }
    assert len(workers) == 3
