import pytest

from gpucloud.errors import Conflict, PermissionDenied, ValidationFailed
from tenants import services
from tenants.audit import Actor
from tenants.models import AuditEvent, Membership


def test_an_owner_adds_and_removes_a_member(people):
    alice, tenant = Actor.of(people["alice"]), people["a"]
    membership = services.add_member(actor=alice, tenant=tenant, username="charlie", role="member")
    assert membership.role == "member"

    services.remove_member(actor=alice, tenant=tenant, membership=membership)
    assert not Membership.objects.filter(tenant=tenant, user=people["charlie"]).exists()
    assert AuditEvent.objects.filter(action__in=["member.add", "member.remove"], tenant=tenant).count() == 4


def test_a_viewer_cannot_manage_members(people):
    with pytest.raises(PermissionDenied):
        services.add_member(
            actor=Actor.of(people["bob"]), tenant=people["a"], username="charlie", role="viewer"
        )


def test_the_last_owner_cannot_be_removed_or_demoted(people, admin):
    tenant = people["a"]
    # the admin who created the tenant is an owner too; take that away first
    services.remove_member(
        actor=Actor.of(admin), tenant=tenant, membership=Membership.objects.get(tenant=tenant, user=admin)
    )
    owner = Membership.objects.get(tenant=tenant, user=people["alice"])
    with pytest.raises(Conflict, match="last owner"):
        services.remove_member(actor=Actor.of(people["alice"]), tenant=tenant, membership=owner)
    with pytest.raises(Conflict, match="last owner"):
        services.add_member(actor=Actor.of(people["alice"]), tenant=tenant, username="alice", role="viewer")


def test_unknown_users_and_roles_are_refused_clearly(people):
    alice = Actor.of(people["alice"])
    with pytest.raises(ValidationFailed, match="no user called 'nobody'"):
        services.add_member(actor=alice, tenant=people["a"], username="nobody", role="member")
    with pytest.raises(ValidationFailed, match="owner, admin, member, viewer"):
        services.add_member(actor=alice, tenant=people["a"], username="charlie", role="boss")
