import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests
from django.contrib.auth.models import User

from core.audit import Actor
from core.models import AuditEvent
from gpucloud.errors import Conflict, PermissionDenied, ValidationFailed
from tenants import tokens
from tenants.models import Membership
from tenants.services.members import add_member, remove_member, sync_sso_memberships


def test_an_owner_adds_and_removes_a_member(people):
    alice, tenant = Actor.of(people["alice"]), people["a"]
    membership = add_member(actor=alice, tenant=tenant, username="charlie", role="member")
    assert membership.role == "member"

    remove_member(actor=alice, tenant=tenant, membership=membership)
    assert not Membership.objects.filter(tenant=tenant, user=people["charlie"]).exists()
    assert AuditEvent.objects.filter(action__in=["member.add", "member.remove"], tenant=tenant).count() == 4


def test_a_viewer_cannot_manage_members(people):
    with pytest.raises(PermissionDenied):
        add_member(actor=Actor.of(people["bob"]), tenant=people["a"], username="charlie", role="viewer")


def test_the_last_owner_cannot_be_removed_or_demoted(people, admin):
    tenant = people["a"]
    # the admin who created the tenant is an owner too; take that away first
    remove_member(
        actor=Actor.of(admin), tenant=tenant, membership=Membership.objects.get(tenant=tenant, user=admin)
    )
    owner = Membership.objects.get(tenant=tenant, user=people["alice"])
    with pytest.raises(Conflict, match="last owner"):
        remove_member(actor=Actor.of(people["alice"]), tenant=tenant, membership=owner)
    with pytest.raises(Conflict, match="last owner"):
        add_member(actor=Actor.of(people["alice"]), tenant=tenant, username="alice", role="viewer")


def test_unknown_users_and_roles_are_refused_clearly(people):
    alice = Actor.of(people["alice"])
    with pytest.raises(ValidationFailed, match="no user called 'nobody'"):
        add_member(actor=alice, tenant=people["a"], username="nobody", role="member")
    with pytest.raises(ValidationFailed, match="owner, admin, member, viewer"):
        add_member(actor=alice, tenant=people["a"], username="charlie", role="boss")


def test_a_billing_viewer_sees_the_tenant_and_quotas_but_not_its_people(api, people, make_user):
    make_user("frank")
    add_member(actor=Actor.of(people["admin"]), tenant=people["a"], username="frank", role="billing")
    frank = api(User.objects.get(username="frank"))

    assert frank.get("/api/v1/tenants/tenant-a/").status_code == 200
    assert frank.get("/api/v1/tenants/tenant-a/quotas/").status_code == 200
    members = frank.get("/api/v1/tenants/tenant-a/members/")
    assert members.status_code == 403
    assert "admin, member, owner, viewer" in members.json()["detail"]
    assert frank.get("/api/v1/tenants/tenant-b/members/").status_code == 404


def test_a_role_given_by_hand_replaces_one_from_groups_and_sign_in_keeps_it(people):
    bob = people["bob"]
    Membership.objects.filter(user=bob, tenant=people["a"]).update(source="sso")
    add_member(actor=Actor.of(people["alice"]), tenant=people["a"], username="bob", role="member")
    sync_sso_memberships(actor=Actor.system("sso"), user=bob, grants={})

    assert Membership.objects.get(user=bob, tenant=people["a"]).source == "manual"


def test_only_owners_change_owners_through_every_door(api, people, make_user):
    alice, tenant = Actor.of(people["alice"]), people["a"]
    make_user("dave")
    add_member(actor=alice, tenant=tenant, username="dave", role="admin")
    dave = api(User.objects.get(username="dave"))

    demoted = dave.patch("/api/v1/tenants/tenant-a/members/alice/", {"role": "viewer"}, format="json")
    removed = dave.delete("/api/v1/tenants/tenant-a/members/alice/")
    promoted = dave.post(
        "/api/v1/tenants/tenant-a/members/", {"username": "bob", "role": "owner"}, format="json"
    )

    for answer in (demoted, removed, promoted):
        assert answer.status_code == 403
        assert answer["Content-Type"] == "application/problem+json"
        assert "needs an owner of tenant tenant-a" in answer.json()["detail"]
    assert Membership.objects.get(tenant=tenant, user=people["alice"]).role == "owner"
    assert Membership.objects.get(tenant=tenant, user=people["bob"]).role == "viewer"
    # an admin still manages every other role
    assert (
        dave.patch("/api/v1/tenants/tenant-a/members/bob/", {"role": "member"}, format="json").status_code
        == 200
    )


def test_an_owner_changes_another_owner_but_not_the_last_one(api, people, admin):
    alice = api(people["alice"])
    # the platform administrator who created tenant A is its other owner
    assert (
        alice.patch(
            f"/api/v1/tenants/tenant-a/members/{admin.username}/", {"role": "viewer"}, format="json"
        ).status_code
        == 200
    )

    last = alice.patch("/api/v1/tenants/tenant-a/members/alice/", {"role": "admin"}, format="json")
    gone = alice.delete("/api/v1/tenants/tenant-a/members/alice/")

    for answer in (last, gone):
        assert answer.status_code == 409
        assert answer["Content-Type"] == "application/problem+json"
        assert "alice is the last owner of tenant-a" in answer.json()["detail"]


def test_owners_removing_each_other_at_once_always_leave_one(live_server, transactional_db, people, admin):
    tenant = people["a"]
    owners = ["alice"] + [f"owner{i}" for i in range(4)]
    for name in owners[1:]:
        User.objects.create_user(name, password="x")
        add_member(actor=Actor.of(admin), tenant=tenant, username=name, role="owner")
    remove_member(
        actor=Actor.of(admin), tenant=tenant, membership=Membership.objects.get(tenant=tenant, user=admin)
    )
    bearer = {
        name: tokens.create_token(actor=Actor.of(admin), user=User.objects.get(username=name), name="t")[1]
        for name in owners
    }
    # 20 requests: every owner removes or demotes every other owner, all at once
    plan = [(a, b) for a in owners for b in owners if a != b]
    start = threading.Barrier(len(plan))

    def act(step: int) -> int:
        actor, target = plan[step]
        url = f"{live_server.url}/api/v1/tenants/tenant-a/members/{target}/"
        headers = {"Authorization": f"Bearer {bearer[actor]}"}
        start.wait()
        if step % 2:
            return requests.delete(url, headers=headers, timeout=30).status_code
        return requests.patch(url, json={"role": "viewer"}, headers=headers, timeout=30).status_code

    with ThreadPoolExecutor(len(plan)) as pool:
        answers = list(pool.map(act, range(len(plan))))

    assert len(plan) == 20
    assert set(answers) <= {200, 204, 403, 404, 409}, answers
    assert Membership.objects.filter(tenant=tenant, role="owner").count() >= 1
