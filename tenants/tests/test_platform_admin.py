"""Platform administrators are named at the console (or by OIDC_ADMIN_GROUPS), and every change is audited."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from core.audit import Actor
from core.models import AuditEvent
from gpucloud.errors import PermissionDenied
from tenants.selectors import visible_tenants
from tenants.services import platform_admins


def test_the_console_names_a_platform_administrator_and_the_audit_log_says_so(people):
    alice = people["alice"]
    out = io.StringIO()

    call_command("platform_admin", "alice", stdout=out)

    alice.refresh_from_db()
    assert "alice is now a platform administrator" in out.getvalue()
    assert set(visible_tenants(alice)) == {people["a"], people["b"]}
    row = AuditEvent.objects.get(action="user.platform_admin")
    assert row.actor_label == "console:platform_admin"
    assert row.after == {"platform_admin": True}

    call_command("platform_admin", "alice", "--revoke", stdout=out)
    alice.refresh_from_db()
    assert set(visible_tenants(alice)) == {people["a"]}
    assert AuditEvent.objects.filter(action="user.platform_admin").count() == 2


def test_a_tenant_owner_cannot_make_anyone_a_platform_administrator(people):
    with pytest.raises(PermissionDenied, match="needs a platform administrator"):
        platform_admins.set_platform_admin(actor=Actor.of(people["alice"]), user=people["bob"], admin=True)
