"""An edit that a GitOps source's next sync would undo is refused, through every door, naming the source
(`core.declared`; issue 24 §7). Fields the source does not declare stay the team's to change."""

from __future__ import annotations

import pytest

from core.audit import Actor
from core.models import AuditEvent
from fleet.models import GpuClass
from gitops import services as gitops
from gitops.models import GitSource
from gitops.tests.gitrepos import declare_tenant
from tenants.models import Tenant
from tenants.services import quotas

CONSOLE = Actor.console("test")
VISION = """\
apiVersion: gpucloud.io/v1alpha1
kind: Tenant
metadata: {name: vision}
spec:
  displayName: Vision Team
  members: [{user: alice, role: owner}]
  quotas: [{gpuClass: h200-141gb, guaranteed: 8}]
"""


@pytest.fixture
def vision(repo, demo_fleet, make_user, settings, tmp_path):
    """Tenant vision, declared by the GitOps source `platform` (display name, members, quotas)."""
    settings.VAR_DIR = tmp_path / "var"
    make_user("alice")
    make_user("dave")
    declare_tenant(repo, VISION)
    return Tenant.objects.get(slug="vision")


def test_a_rename_through_the_api_is_refused_naming_the_source_and_where_to_change_it(api, vision, repo):
    alice = api(vision.memberships.get().user)

    answer = alice.patch("/api/v1/tenants/vision/", {"display_name": "Renamed"}, format="json")

    assert answer.status_code == 409, answer.json()
    problem = answer.json()
    assert problem["type"].endswith("/managed-by-source")
    assert problem["managed_by"] == "gitops:platform"
    assert (
        f"Tenant vision is declared by the GitOps source platform ({repo.url}, branch main, folder tenants)"
        in problem["detail"]
    )
    assert problem["detail"].endswith("change displayName there")
    vision.refresh_from_db()
    assert vision.display_name == "Vision Team"
    assert not AuditEvent.objects.filter(action="tenant.update").exists()


def test_every_door_refuses_what_the_next_sync_would_undo_even_for_a_platform_administrator(
    api, admin, vision
):
    platform = api(admin)
    h200 = "/api/v1/tenants/vision/quotas/h200-141gb/"

    refused = {
        "quota": platform.put(h200, {"guaranteed": 2}, format="json"),
        "quota removed": platform.delete(h200),
        "member": platform.post("/api/v1/tenants/vision/members/", {"username": "dave", "role": "viewer"}),
        "owner removed": platform.delete("/api/v1/tenants/vision/members/alice/"),
        "deletion": platform.delete("/api/v1/tenants/vision/"),
    }

    assert {what: answer.status_code for what, answer in refused.items()} == dict.fromkeys(refused, 409)
    for answer in refused.values():
        assert "is declared by the GitOps source platform" in answer.json()["detail"]
    assert "remove it there (the sync then prunes it)" in refused["deletion"].json()["detail"]
    vision.refresh_from_db()
    assert vision.state != "deleting"
    assert vision.quotas.get().guaranteed == 8
    assert sorted(vision.memberships.values_list("user__username", flat=True)) == ["alice"]


def test_fields_the_source_does_not_declare_are_the_teams_to_change(api, vision):
    alice = api(vision.memberships.get().user)

    sleep = alice.patch("/api/v1/tenants/vision/", {"sleep_when_idle": True}, format="json")
    budget = alice.post(
        "/api/v1/budgets/", {"tenant": "vision", "monthly_amount": "500.00", "currency": "USD"}, format="json"
    )
    same_name = alice.patch("/api/v1/tenants/vision/", {"display_name": "Vision Team"}, format="json")

    assert sleep.status_code == 200, sleep.json()
    assert budget.status_code == 201, budget.json()
    assert same_name.status_code == 200  # no change: nothing for the sync to undo


def test_the_source_itself_still_changes_what_it_declares(repo, vision):
    repo.commit("rename", {"tenants/vision.yaml": VISION.replace("Vision Team", "Vision")})

    synced = gitops.sync(GitSource.objects.get(name="platform"))

    assert synced.state == "synced", synced.error
    vision.refresh_from_db()
    assert vision.display_name == "Vision"


def test_a_service_call_carries_its_source_and_only_the_declaring_one_passes(vision, admin):
    from gpucloud.errors import ManagedBySource  # here: the other tests stand on the code before issue 24 too

    h200 = GpuClass.objects.get(name="h200-141gb")
    for source in ("", "api:admin", "gitops:other"):
        actor = Actor(user=admin, label="admin", source=source)
        with pytest.raises(ManagedBySource):
            quotas.set_quota(actor=actor, tenant=vision, gpu_class=h200, guaranteed=4)

    quotas.set_quota(
        actor=Actor(user=None, label="system:gitops:platform", operator=True, source="gitops:platform"),
        tenant=vision,
        gpu_class=h200,
        guaranteed=4,
    )
    assert vision.quotas.get().guaranteed == 4


@pytest.mark.parametrize(
    ("name", "allowed"),
    [
        ("ci-platform", True),
        ("team/vision", True),
        ("gitops:prod", False),
        ("kubernetes:x", False),
        ("api:alice", False),
        ("api", False),
        ("Evil", False),
        ("", False),
    ],
)
def test_only_names_no_door_sets_itself_may_be_given_as_a_source(name, allowed):
    from core.declared import source_problem

    assert (source_problem(name) is None) is allowed
