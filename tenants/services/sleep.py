"""Sleep and idleness: the tenant's vCluster sleep settings, the idle flag metering raises, and waking."""

from __future__ import annotations

import re
from typing import Any

from django.utils import timezone

from core import audit
from core.audit import Actor
from core.declared import refuse_undone_edit
from gpucloud.errors import ValidationFailed
from gpucloud.transactions import atomic
from tenants.models import Tenant
from tenants.services.lifecycle import reconcile_on_commit, require_live
from tenants.services.roles import require

SLEEP_DELAY_RE = re.compile(r"^(?=\d)(\d+h)?(\d+m)?(\d+s)?$")


def sleep_delay_problem(value: str) -> str | None:
    """Why `value` is not a sleep delay, or None. vCluster's `sleep.auto.afterInactivity` is a Go duration;
    gpucloud accepts hours, minutes, seconds, at least a minute, or empty (the host cluster's default)."""
    if value and (not SLEEP_DELAY_RE.fullmatch(value) or _seconds_of(value) < 60):
        return (
            f"{value!r} is not a delay of at least a minute; write it like 45m, 2h or 1h30m, or leave it "
            "empty"
        )
    return None


def _validate_sleep_delay(value: str) -> None:
    problem = sleep_delay_problem(value)
    if problem is not None:
        raise ValidationFailed.on("sleep_after_inactivity", problem)


def _seconds_of(value: str) -> int:
    units = {"h": 3600, "m": 60, "s": 1}
    return sum(int(n) * units[u] for n, u in re.findall(r"(\d+)([hms])", value))


@atomic
def set_sleep_settings(
    *,
    actor: Actor,
    tenant: Tenant,
    sleep_after_inactivity: str | None = None,
    sleep_when_idle: bool | None = None,
) -> Tenant:
    """The tenant's vCluster sleep mode (`sleep.auto.afterInactivity`, empty = the host cluster's default) and
    whether gpucloud may put its cluster to sleep when metering finds its GPUs idle. Owners and admins."""
    require(actor, tenant, "tenant.update", "changing the sleep settings")
    tenant = Tenant.objects.select_for_update().get(pk=tenant.pk)
    require_live(tenant, "changing the sleep settings")
    before = {
        "sleep_after_inactivity": tenant.sleep_after_inactivity,
        "sleep_when_idle": tenant.sleep_when_idle,
    }
    if sleep_after_inactivity is not None:
        _validate_sleep_delay(sleep_after_inactivity.strip())
        tenant.sleep_after_inactivity = sleep_after_inactivity.strip()
    if sleep_when_idle is not None:
        tenant.sleep_when_idle = sleep_when_idle
    after = {
        "sleep_after_inactivity": tenant.sleep_after_inactivity,
        "sleep_when_idle": tenant.sleep_when_idle,
    }
    if after == before:
        return tenant
    refuse_undone_edit(actor, "Tenant", tenant.slug, ["sleep"], "changing the sleep settings")
    tenant.save(update_fields=["sleep_after_inactivity", "sleep_when_idle", "updated_at"])
    audit.record(
        actor,
        "tenant.sleep_settings",
        object_type="tenant",
        object_id=tenant.public_id,
        tenant=tenant,
        before=before,
        after=after,
    )
    reconcile_on_commit(tenant)
    return tenant


def _idleness(tenant: Tenant) -> dict[str, Any]:
    """The tenant's idle flag and sleep as audited, the same fields before and after."""
    return {
        "idle_since": tenant.idle_since and tenant.idle_since.isoformat(),
        "asleep": tenant.asleep_since is not None,
    }


@atomic
def flag_idle(*, actor: Actor, tenant: Tenant, since: Any, at: Any = None) -> bool:
    """Metering found the tenant's GPUs idle since `since`: flag it and, when it opted in, put its cluster to
    sleep (its pods go, its guarantee is lent to its cohort). Returns whether it was put to sleep now."""
    tenant = Tenant.objects.select_for_update().get(pk=tenant.pk)
    if tenant.idle_since is not None:
        return False  # flagged already: told once
    before = _idleness(tenant)
    tenant.idle_since = since
    sleep = tenant.sleep_when_idle and tenant.state == Tenant.State.READY
    if sleep:
        tenant.asleep_since = at or timezone.now()
    tenant.save(update_fields=["idle_since", "asleep_since", "updated_at"])
    audit.record(
        actor,
        "tenant.idle",
        object_type="tenant",
        object_id=tenant.public_id,
        tenant=tenant,
        before=before,
        after=_idleness(tenant),
    )
    if sleep:
        reconcile_on_commit(tenant)
    return sleep


@atomic
def wake_tenant(*, actor: Actor, tenant: Tenant, reason: str = "woken") -> Tenant:
    """Wake a tenant cluster gpucloud put to sleep, or clear its idle flag: its quota returns to it at the
    next pass, and idleness counts afresh from now. The team may do it (any kubectl call of theirs would,
    too); metering does it when it sees activity."""
    if not actor.label.startswith("system:"):
        require(actor, tenant, "tenant.wake", "waking the cluster")
    tenant = Tenant.objects.select_for_update().get(pk=tenant.pk)
    if tenant.idle_since is None and tenant.asleep_since is None:
        return tenant
    before = _idleness(tenant)
    tenant.idle_since = tenant.asleep_since = None
    tenant.woken_at = timezone.now()
    tenant.save(update_fields=["idle_since", "asleep_since", "woken_at", "updated_at"])
    audit.record(
        actor,
        "tenant.wake",
        object_type="tenant",
        object_id=tenant.public_id,
        tenant=tenant,
        before=before,
        after={**_idleness(tenant), "reason": reason},
    )
    reconcile_on_commit(tenant)
    return tenant
