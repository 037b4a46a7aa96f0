import pytest
from django.contrib.auth.models import User

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


def test_a_billing_viewer_sees_the_tenant_and_quotas_but_not_its_people(api, people, make_user):
    make_user("frank")
    services.add_member(actor=Actor.of(people["admin"]), tenant=people["a"], username="frank", role="billing")
    frank = api(User.objects.get(username="frank"))

    assert frank.get("/api/v1/tenants/tenant-a/").status_code == 200
    assert frank.get("/api/v1/tenants/tenant-a/quotas/").status_code == 200
    members = frank.get("/api/v1/tenants/tenant-a/members/")
    assert members.status_code == 403 and "admin, member, owner, viewer" in members.json()["detail"]
    assert frank.get("/api/v1/tenants/tenant-b/members/").status_code == 404


def test_a_role_given_by_hand_replaces_one_from_groups_and_sign_in_keeps_it(people):
    bob = people["bob"]
    Membership.objects.filter(user=bob, tenant=people["a"]).update(source="sso")
    services.add_member(actor=Actor.of(people["alice"]), tenant=people["a"], username="bob", role="member")
    services.sync_sso_memberships(actor=Actor.system("sso"), user=bob, grants={})

    assert Membership.objects.get(user=bob, tenant=people["a"]).source == "manual"
