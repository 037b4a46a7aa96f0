"""`manage.py create_user NAME`, the README's way to make the Terraform example's member: a local account with
a password shown once, and harmless to run again, whether the account was made by it or on the Users page."""

from __future__ import annotations

from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError

from core.audit import Actor
from core.models import AuditEvent
from tenants import users


def run(*args: str) -> str:
    out = StringIO()
    call_command("create_user", *args, stdout=out)
    return out.getvalue()


def test_it_makes_a_local_account_and_shows_its_password_once(db):
    said = run("alice")
    alice = User.objects.get(username="alice")
    password = said.split("password ")[1].split(" ")[0]
    assert alice.check_password(password)
    event = AuditEvent.objects.get(action="user.create", object_id="alice")
    assert event.actor_label == "console:create_user"


def test_running_it_again_changes_nothing_and_says_so(db):
    run("alice")
    hashed = User.objects.get(username="alice").password
    assert run("alice") == "alice has an account already; nothing changed\n"
    assert User.objects.get(username="alice").password == hashed


def test_an_account_made_on_the_users_page_is_left_as_it_is(db, admin):
    users.create_local_user(actor=Actor.of(admin), username="alice", email="alice@example.com")
    assert "nothing changed" in run("alice")
    assert AuditEvent.objects.filter(action="user.create", object_id="alice").count() == 1


def test_a_bad_name_is_a_message_not_a_traceback(db):
    with pytest.raises(CommandError, match="is not a username"):
        run("two words")
