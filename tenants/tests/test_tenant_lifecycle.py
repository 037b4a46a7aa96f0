import pytest

from core.audit import Actor
from core.models import AuditEvent
from gpucloud.errors import Conflict, PermissionDenied
from tenants.models import Tenant
from tenants.services import lifecycle


def _set_state(tenant, state):
    Tenant.objects.filter(pk=tenant.pk).update(state=state)
    tenant.refresh_from_db()


def test_a_ready_tenant_can_be_suspended_and_resumed(admin, make_tenant):
    tenant = make_tenant("vision")
    _set_state(tenant, Tenant.State.READY)

    suspended = lifecycle.suspend_tenant(actor=Actor.of(admin), tenant=tenant)
    assert suspended.state == Tenant.State.SUSPENDED
    assert suspended.desired == "suspended"

    resumed = lifecycle.resume_tenant(actor=Actor.of(admin), tenant=suspended)
    assert resumed.state == Tenant.State.PROVISIONING
    assert resumed.desired == "running"
    assert list(AuditEvent.objects.filter(tenant=tenant).values_list("action", flat=True)) == [
        "tenant.resume",
        "tenant.suspend",
        "tenant.create",
    ]


def test_resuming_a_deleted_tenant_is_refused_with_the_allowed_transitions(admin, make_tenant):
    tenant = make_tenant("vision")
    _set_state(tenant, Tenant.State.DELETED)

    with pytest.raises(Conflict, match="is deleted; only a suspended or failed tenant can be resumed"):
        lifecycle.resume_tenant(actor=Actor.of(admin), tenant=tenant)
    tenant.refresh_from_db()
    assert tenant.state == Tenant.State.DELETED


def test_suspending_a_pending_tenant_is_refused(admin, make_tenant):
    tenant = make_tenant("vision")
    with pytest.raises(Conflict, match="from pending it can become: deleting, failed, provisioning"):
        lifecycle.suspend_tenant(actor=Actor.of(admin), tenant=tenant)


def test_a_failed_tenant_is_retried_by_resume(admin, make_tenant):
    tenant = make_tenant("vision")
    _set_state(tenant, Tenant.State.FAILED)

    assert lifecycle.resume_tenant(actor=Actor.of(admin), tenant=tenant).state == Tenant.State.PENDING


def test_deleting_starts_deletion_and_needs_an_owner(people):
    with pytest.raises(PermissionDenied):
        lifecycle.delete_tenant(actor=Actor.of(people["bob"]), tenant=people["a"])

    tenant = lifecycle.delete_tenant(actor=Actor.of(people["alice"]), tenant=people["a"])
    assert tenant.state == Tenant.State.DELETING
    assert tenant.desired == "absent"


def test_a_viewer_cannot_suspend(people):
    _set_state(people["a"], Tenant.State.READY)
    with pytest.raises(PermissionDenied, match="admin, owner"):
        lifecycle.suspend_tenant(actor=Actor.of(people["bob"]), tenant=people["a"])


def test_renaming_writes_nothing_when_nothing_changes(admin, make_tenant):
    tenant = make_tenant("vision", display_name="Vision")
    lifecycle.update_tenant(actor=Actor.of(admin), tenant=tenant, display_name="Vision")
    assert AuditEvent.objects.filter(action="tenant.update").count() == 0

    lifecycle.update_tenant(actor=Actor.of(admin), tenant=tenant, display_name="Vision team")
    assert AuditEvent.objects.get(action="tenant.update").before["display_name"] == "Vision"
