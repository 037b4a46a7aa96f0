"""Platform administrators: the one flag on a user that allows everything in every tenant."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model

from core import audit
from core.audit import Actor
from gpucloud.errors import PermissionDenied
from gpucloud.transactions import atomic

User = get_user_model()


@atomic
def set_platform_admin(*, actor: Actor, user: Any, admin: bool) -> bool:
    """Make `user` a platform administrator, or stop them being one; returns whether anything changed.

    Platform administrators may do everything in every tenant, so this is audited like any other write. A
    person must be a platform administrator to do it; a process (the console, single sign-on) and the
    identity provider's groups over SCIM are trusted.
    """
    if not actor.manages_people:
        raise PermissionDenied("naming platform administrators needs a platform administrator")
    user = User.objects.select_for_update().get(pk=user.pk)
    if user.is_staff == admin:
        return False
    user.is_staff = admin
    user.save(update_fields=["is_staff"])
    audit.record(
        actor,
        "user.platform_admin",
        object_type="user",
        object_id=user.get_username(),
        before={"platform_admin": not admin},
        after={"platform_admin": admin},
    )
    return True
