"""The writes SCIM makes: people and groups as the identity provider provisions them (docs/scim.md).

Each validates, writes one transaction and audits as the SCIM token that asked. People are Django users
with a `ScimUser` row; deactivating one (`active: false`) or deleting one goes through
`tenants.users.set_active`, which revokes their tokens and ends their sessions in the same transaction.
Groups grant tenant roles through their names, as the groups claim of a sign-in does (`tenants.sso`): a
change of members or of name re-syncs the roles of everyone it touches, at once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from core import audit
from core.audit import Actor
from gpucloud.errors import Conflict, PermissionDenied, ValidationFailed
from tenants import sso, users
from tenants.models import ScimGroup, ScimUser
from tenants.services import platform_admins
from tenants.services.members import sync_sso_memberships

User = get_user_model()
USERNAME = re.compile(r"^[\w.@+-]{1,150}$")


@dataclass(frozen=True)
class Person:
    """What SCIM says of a person, in gpucloud's terms: active unless the provider says `active: false`."""

    username: str
    external_id: str = ""
    given_name: str = ""
    family_name: str = ""
    email: str = ""
    display_name: str = ""
    active: bool = True
    attributes: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Team:
    """What SCIM says of a group: its name, the provider's id, its members (`ScimUser` public ids)."""

    display_name: str
    external_id: str = ""
    members: tuple[str, ...] = ()
    attributes: dict[str, Any] = field(default_factory=dict)


def _require(actor: Actor) -> None:
    if not actor.manages_people:
        raise PermissionDenied("provisioning people needs a SCIM token or a platform administrator")


def user_snapshot(row: ScimUser) -> dict[str, Any]:
    user = row.user
    return {
        "username": user.username,
        "external_id": row.external_id,
        "email": user.email,
        "name": f"{user.first_name} {user.last_name}".strip(),
        "display_name": row.display_name,
        "active": user.is_active,
    }


def _check_username(username: str, *, other_than: Any = None) -> None:
    if not USERNAME.match(username):
        raise ValidationFailed.on(
            "userName", f"{username!r} is not a username here: 1-150 letters, digits and . @ + - _"
        )
    taken = User.objects.filter(username__iexact=username)
    if other_than is not None:
        taken = taken.exclude(pk=other_than.pk)
    if taken.exists():
        raise Conflict(f"userName {username!r} is taken by another account", errors={"userName": ["taken"]})


def _check_lengths(**values: str) -> None:
    """The columns' lengths, said as SCIM names them (a longer value would fail in the database)."""
    for name, value in values.items():
        if len(value) > 255:
            raise ValidationFailed.on(name, f"{name} is {len(value)} characters long; at most 255 are kept")
    if len(values.get("email", "")) > 254:
        raise ValidationFailed.on("emails", "an e-mail address is at most 254 characters long")


def _touch(row: ScimUser | ScimGroup) -> None:
    row.version += 1
    row.updated_at = timezone.now()
    fields = ["version", "updated_at", "external_id", "attributes", "display_name"]
    row.save(update_fields=fields)


@transaction.atomic
def create_user(*, actor: Actor, person: Person) -> ScimUser:
    """Make an account for someone the provider provisions; it signs in through the provider only."""
    _require(actor)
    _check_username(person.username)
    _check_lengths(externalId=person.external_id, displayName=person.display_name, email=person.email)
    user = User(
        username=person.username,
        email=person.email,
        first_name=person.given_name[:150],
        last_name=person.family_name[:150],
        is_active=person.active,
    )
    user.set_unusable_password()
    user.save()
    row = ScimUser.objects.create(
        user=user,
        external_id=person.external_id,
        display_name=person.display_name,
        attributes=person.attributes,
    )
    audit.record(actor, "user.create", object_type="user", object_id=user.username, after=user_snapshot(row))
    return row


@transaction.atomic
def update_user(*, actor: Actor, row: ScimUser, person: Person) -> ScimUser:
    """Change a provisioned person; `active: false` deactivates them, cutting tokens and sessions at once."""
    _require(actor)
    row = ScimUser.objects.select_for_update().select_related("user").get(pk=row.pk)
    user = row.user
    before = user_snapshot(row)
    _check_username(person.username, other_than=user)
    _check_lengths(externalId=person.external_id, displayName=person.display_name, email=person.email)
    user.username, user.email = person.username, person.email
    user.first_name, user.last_name = person.given_name[:150], person.family_name[:150]
    user.save(update_fields=["username", "email", "first_name", "last_name"])
    row.external_id, row.display_name = person.external_id, person.display_name
    row.attributes = person.attributes
    _touch(row)
    if person.active != user.is_active:
        users.set_active(actor=actor, user=user, active=person.active)  # audited there, with what it cut
        user.refresh_from_db(fields=["is_active"])
    after = user_snapshot(row)
    if {**before, "active": None} != {**after, "active": None}:  # (de)activation is audited by set_active
        audit.record(
            actor, "user.update", object_type="user", object_id=user.username, before=before, after=after
        )
    return row


@transaction.atomic
def delete_user(*, actor: Actor, row: ScimUser) -> None:
    """The provider deleted the person: deactivate them (tokens revoked, sessions ended), take away every
    role the provider's groups gave, and forget the SCIM record. The account stays, deactivated, so the audit
    log keeps naming it and its name is never given to someone else."""
    _require(actor)
    row = ScimUser.objects.select_for_update().select_related("user").get(pk=row.pk)
    user, before = row.user, user_snapshot(row)
    users.set_active(actor=actor, user=user, active=False)
    row.delete()  # and with it the person's SCIM group memberships
    for identity in user.identities.all():
        identity.groups = []
        identity.save(update_fields=["groups"])
    sync_sso_memberships(actor=actor, user=user, grants={})
    platform_admins.set_platform_admin(actor=actor, user=user, admin=False)
    audit.record(actor, "user.delete", object_type="user", object_id=user.username, before=before)


def group_snapshot(row: ScimGroup) -> dict[str, Any]:
    return {"display_name": row.display_name, "external_id": row.external_id}


def _check_name(name: str, *, other_than: ScimGroup | None = None) -> None:
    if not name.strip():
        raise ValidationFailed.on("displayName", "a group needs a displayName")
    _check_lengths(displayName=name)
    taken = ScimGroup.objects.filter(display_name__iexact=name)
    if other_than is not None:
        taken = taken.exclude(pk=other_than.pk)
    if taken.exists():
        raise Conflict(f"there is already a group called {name!r}", errors={"displayName": ["taken"]})


def _members(ids: tuple[str, ...]) -> list[ScimUser]:
    found = {row.public_id: row for row in ScimUser.objects.filter(public_id__in=ids).select_related("user")}
    missing = sorted(set(ids) - set(found))
    if missing:
        raise ValidationFailed.on(
            "members", f"no user has the id {', '.join(missing)}; a group's members are users of /Users"
        )
    return list(found.values())


def _sync_people(actor: Actor, people: set[ScimUser], dropped_from: dict[ScimUser, str]) -> None:
    """Re-sync the roles of everyone a group change touched; those who left a group leave it in their last
    sign-in's groups too, so the group stops counting now rather than at their next sign-in."""
    for person in sorted(people, key=lambda p: p.pk):  # one order: two changes never lock people crosswise
        if person in dropped_from:
            sso.forget_group(person.user, dropped_from[person])
        sso.sync_grants(actor=actor, user=person.user)


@transaction.atomic
def create_group(*, actor: Actor, team: Team) -> ScimGroup:
    """Take in a group the provider pushes; its members get the roles its name gives."""
    _require(actor)
    _check_name(team.display_name)
    _check_lengths(externalId=team.external_id)
    members = _members(team.members)
    row = ScimGroup.objects.create(
        display_name=team.display_name, external_id=team.external_id, attributes=team.attributes
    )
    row.members.set(members)
    after = {**group_snapshot(row), "added": sorted(m.user.username for m in members)}
    audit.record(actor, "group.create", object_type="group", object_id=row.public_id, after=after)
    _sync_people(actor, set(members), {})
    return row


@transaction.atomic
def update_group(*, actor: Actor, row: ScimGroup, team: Team) -> ScimGroup:
    """Rename a group or change its members; everyone in it before or after gets their roles re-synced."""
    _require(actor)
    row = ScimGroup.objects.select_for_update().get(pk=row.pk)
    _check_name(team.display_name, other_than=row)
    _check_lengths(externalId=team.external_id)
    before = group_snapshot(row)
    old = set(row.members.select_related("user"))
    new = set(_members(team.members))
    renamed = row.display_name != team.display_name
    row.display_name = team.display_name
    row.external_id, row.attributes = team.external_id, team.attributes
    _touch(row)
    row.members.set(new)
    dropped = dict.fromkeys(old if renamed else old - new, before["display_name"])
    after = {
        **group_snapshot(row),
        "added": sorted(m.user.username for m in new - old),
        "removed": sorted(m.user.username for m in old - new),
    }
    audit.record(
        actor, "group.update", object_type="group", object_id=row.public_id, before=before, after=after
    )
    _sync_people(actor, old | new, dropped)
    return row


@transaction.atomic
def delete_group(*, actor: Actor, row: ScimGroup) -> None:
    """The provider deleted a group: its members lose the roles it gave, at once."""
    _require(actor)
    row = ScimGroup.objects.select_for_update().get(pk=row.pk)
    before, public_id = group_snapshot(row), row.public_id
    members = set(row.members.select_related("user"))
    row.delete()
    audit.record(actor, "group.delete", object_type="group", object_id=public_id, before=before)
    _sync_people(actor, members, dict.fromkeys(members, before["display_name"]))
