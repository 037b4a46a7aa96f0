"""Inviting people by username or e-mail before they have an account; the role is theirs at first sign-in."""

import pytest
from django.contrib.auth.models import User

from core.audit import Actor
from core.models import AuditEvent
from gpucloud.errors import PermissionDenied, ValidationFailed
from tenants import invitations
from tenants.models import Invitation, Membership
from tenants.services import members


def test_inviting_someone_with_an_account_adds_them_at_once_by_e_mail(people):
    row = invitations.invite(
        actor=Actor.of(people["alice"]), tenant=people["a"], login="Charlie@Example.com", role="viewer"
    )
    assert isinstance(row, Membership)
    assert row.user == people["charlie"]
    assert row.role == "viewer"
    assert not Invitation.objects.exists()


def test_an_invitation_becomes_a_membership_at_the_first_sign_in(people, client):
    alice, tenant = Actor.of(people["alice"]), people["a"]
    row = invitations.invite(actor=alice, tenant=tenant, login="grace@example.com", role="member")
    assert isinstance(row, Invitation)
    assert AuditEvent.objects.filter(action="member.invite", tenant=tenant).exists()

    User.objects.create_user("grace", "grace@example.com", "pw-grace")  # an administrator makes the account
    assert client.post("/login/", {"username": "grace", "password": "pw-grace"}).status_code == 302
    membership = Membership.objects.get(tenant=tenant, user__username="grace")
    assert (membership.role, membership.source) == ("member", "manual")
    assert Invitation.objects.get().accepted_at is not None
    assert AuditEvent.objects.filter(action="member.add", actor_label="system:invitation").exists()
    assert client.get("/tenants/tenant-a/").status_code == 200


def test_inviting_again_changes_the_pending_role_and_withdrawing_removes_it(people):
    alice, tenant = Actor.of(people["alice"]), people["a"]
    invitations.invite(actor=alice, tenant=tenant, login="heidi@example.com", role="viewer")
    row = invitations.invite(actor=alice, tenant=tenant, login="heidi@example.com", role="admin")
    assert isinstance(row, Invitation)
    assert Invitation.objects.get().role == "admin"
    invitations.cancel(actor=alice, invitation=row)
    assert not Invitation.objects.exists()
    assert invitations.accept(User.objects.create_user("heidi", "heidi@example.com")) == []


def test_invitations_follow_the_role_rules_of_members(people):
    tenant = people["a"]
    with pytest.raises(PermissionDenied):
        invitations.invite(
            actor=Actor.of(people["bob"]), tenant=tenant, login="ivan@example.com", role="viewer"
        )
    members.add_member(actor=Actor.of(people["admin"]), tenant=tenant, username="charlie", role="admin")
    with pytest.raises(PermissionDenied, match="owner"):
        invitations.invite(
            actor=Actor.of(people["charlie"]), tenant=tenant, login="ivan@example.com", role="owner"
        )
    with pytest.raises(ValidationFailed, match="not a role"):
        invitations.invite(
            actor=Actor.of(people["alice"]), tenant=tenant, login="ivan@example.com", role="boss"
        )
    with pytest.raises(ValidationFailed, match="neither a username nor an e-mail"):
        invitations.invite(actor=Actor.of(people["alice"]), tenant=tenant, login="two words", role="viewer")
    assert not Invitation.objects.exists()
