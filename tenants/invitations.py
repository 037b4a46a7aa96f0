"""Inviting people who have no account yet: the role waits, and becomes a membership at their first sign-in.

One rule for every door (portal, API, manifests): a username must name an account; an e-mail address names
the account that has it, or else becomes an invitation. An unknown username is refused, never turned into an
invitation: a typo would otherwise wait silently for someone who never comes.

Someone who already has an account is added at once by `members.add_member` (every rule is there); an
invitation is checked by the same rules when it is made (who may grant which role, a live tenant), so
accepting it at sign-in needs no actor's permission.
"""

from __future__ import annotations

import re
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from core import audit
from core.audit import Actor
from core.declared import refuse_undone_edit
from gpucloud.errors import ValidationFailed
from tenants.models import Invitation, Membership, Tenant
from tenants.services import members, roles

User = get_user_model()
LOGIN_RE = re.compile(r"^[\w.@+-]{1,150}$|^[^@\s]{1,64}@[^@\s]{1,189}$")


def invitation_snapshot(invitation: Invitation) -> dict[str, Any]:
    return {"login": invitation.login, "role": invitation.role}


def existing_user(login: str) -> Any:
    """The account a username or e-mail address names, if there is exactly one."""
    users = list(User.objects.filter(Q(username=login) | Q(email__iexact=login), is_active=True)[:2])
    return users[0] if len(users) == 1 else None


@transaction.atomic
def invite(*, actor: Actor, tenant: Tenant, login: str, role: str) -> Membership | Invitation:
    """Add the person now if they have an account (`members.add_member`), else invite them by e-mail.

    Returns the membership, or the (new or updated) pending invitation. A username without an account is
    refused (422), as `add_member` refuses it.
    """
    login = (login or "").strip()
    if not LOGIN_RE.match(login):
        raise ValidationFailed.on(
            "username", f"{login!r} is neither a username nor an e-mail address; give one of them"
        )
    if "@" not in login:  # a username: its account gets the role, or `add_member` refuses it
        return members.add_member(actor=actor, tenant=tenant, username=login, role=role)
    user = existing_user(login)
    if user is not None:
        return members.add_member(actor=actor, tenant=tenant, username=user.get_username(), role=role)
    members.require_member_grant(actor, tenant, role)
    invitation = Invitation.objects.select_for_update().filter(tenant=tenant, login=login, accepted_at=None)
    row = invitation.first()
    before = invitation_snapshot(row) if row else None
    if "@" in login and (row is None or row.role != role):  # invitations by e-mail are a manifest's members
        refuse_undone_edit(actor, "Tenant", tenant.slug, ["members"], f"inviting {login}")
    if row is None:
        row = Invitation.objects.create(tenant=tenant, login=login, role=role, invited_by=actor.user)
    else:
        row.role = role
        row.save(update_fields=["role"])
    audit.record(
        actor,
        "member.invite",
        object_type="invitation",
        object_id=f"{tenant.slug}/{login}",
        tenant=tenant,
        before=before,
        after=invitation_snapshot(row),
    )
    return row


@transaction.atomic
def cancel(*, actor: Actor, invitation: Invitation) -> None:
    """Withdraw a pending invitation."""
    roles.require(actor, invitation.tenant, "member.manage", "managing members")
    if "@" in invitation.login:
        what = f"withdrawing the invitation of {invitation.login}"
        refuse_undone_edit(actor, "Tenant", invitation.tenant.slug, ["members"], what)
    before = invitation_snapshot(invitation)
    invitation.delete()
    audit.record(
        actor,
        "member.uninvite",
        object_type="invitation",
        object_id=f"{invitation.tenant.slug}/{before['login']}",
        tenant=invitation.tenant,
        before=before,
    )


@transaction.atomic
def accept(user: Any) -> list[Membership]:
    """At sign-in: turn the pending invitations for the user's username or e-mail into memberships.

    A tenant where the user already has a role keeps that role (the invitation is marked accepted); a tenant
    being deleted takes no one. Each membership is audited as added by the inviter's invitation.
    """
    logins = Q(login=user.get_username()) | (Q(login__iexact=user.email) if user.email else Q(pk__in=[]))
    pending = Invitation.objects.select_for_update().filter(logins, accepted_at=None).select_related("tenant")
    made = []
    for invitation in pending:
        invitation.accepted_at, invitation.user = timezone.now(), user
        invitation.save(update_fields=["accepted_at", "user"])
        if invitation.tenant.state in (Tenant.State.DELETING, Tenant.State.DELETED):
            continue
        membership, created = Membership.objects.get_or_create(
            tenant=invitation.tenant, user=user, defaults={"role": invitation.role}
        )
        if created:
            made.append(membership)
            members.access_changed(invitation.tenant)
            audit.record(
                Actor.system("invitation"),
                "member.add",
                object_type="membership",
                object_id=f"{invitation.tenant.slug}/{user.get_username()}",
                tenant=invitation.tenant,
                after={**members.membership_snapshot(membership), "invited_as": invitation.login},
            )
    return made
