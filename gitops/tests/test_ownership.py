"""Ownership of declared objects cannot be forged (issue 24 §1): the attacks, over real HTTP with real bearer
tokens on PostgreSQL, and a real Celery worker where a sync or a prune follows."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
import requests
import yaml

from billing.services import rates
from core.audit import Actor
from core.models import AuditEvent
from gitops import services
from gitops.models import GitSource, ManagedObject
from gitops.tests.gitrepos import Repo
from tenants.models import Membership, Tenant
from tenants.services.members import add_member
from tenants.tokens import create_service_token, create_token

CONSOLE = Actor.console("test")
API_VERSION = "gpucloud.io/v1alpha1"
pytestmark = pytest.mark.django_db(transaction=True)


def document(kind: str, name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": kind, "metadata": {"name": name}, "spec": spec}


def wait_for(read: Callable[[], Any], done: Callable[[Any], bool], timeout: float = 20) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = read()
        if done(value) or time.monotonic() > deadline:
            return value
        time.sleep(0.1)


class Caller:
    """Someone calling the live server with a real bearer token of theirs."""

    def __init__(self, base: str, token: str) -> None:
        self.base, self.headers = base, {"Authorization": f"Bearer {token}"}

    def post(self, path: str, body: dict[str, Any] | None = None) -> requests.Response:
        return requests.post(f"{self.base}/api/v1{path}", json=body, headers=self.headers, timeout=60)

    def apply(self, *documents: dict[str, Any], **options: Any) -> requests.Response:
        return self.post("/apply/", {"documents": list(documents), **options})


@pytest.fixture
def caller(live_server) -> Callable[..., Caller]:
    def make(user: Any, scope: str = "admin", **token: Any) -> Caller:
        _, text = create_token(actor=CONSOLE, user=user, name="attack", scope=scope, **token)
        return Caller(live_server.url, text)

    return make


@pytest.fixture
def delta(make_tenant, make_user, admin):
    """Tenant delta with Bill, who holds its billing role only."""
    tenant = make_tenant("delta")
    make_user("bill")
    add_member(actor=Actor.of(admin), tenant=tenant, username="bill", role="billing")
    return tenant


@pytest.fixture
def prod(tmp_path, settings, demo_fleet):
    """The GitOps source `prod`, whose repository declares one tenant of its own."""
    settings.VAR_DIR = tmp_path / "var"
    repo = Repo(tmp_path / "prod")
    repo.commit("prod", {"tenants/ours.yaml": yaml.safe_dump(document("Tenant", "ours", displayName="Ours"))})
    return services.create_source(actor=CONSOLE, name="prod", url=repo.url, path="tenants")


def test_a_billing_member_cannot_get_their_tenant_pruned_by_a_gitops_source(
    caller, delta, prod, admin, celery_worker, settings
):
    settings.SIMULATED_PROVISION_DELAY = settings.SIMULATED_DELETE_DELAY = 0.1
    bill = caller(delta.memberships.get(role="billing").user, scope="write")
    claim = document("Tenant", "delta")

    forged = bill.apply(claim, source="gitops:prod")
    own = bill.apply(claim)  # its own source: a no-op claims nothing for someone who may not claim

    assert forged.status_code == 403, forged.text
    assert "naming a source is for platform administrators" in forged.json()["detail"]
    assert own.status_code == 200, own.text
    assert (own.json()["changed"], own.json()["source"], own.json()["ownership"]) == (False, "api:bill", [])
    assert not ManagedObject.objects.filter(name="delta").exists()
    # The next sync of prod, by a real worker: it prunes nothing of delta.
    synced = caller(admin).post("/gitops/sources/prod/sync/")
    assert synced.status_code == 202
    source = wait_for(lambda: GitSource.objects.get(pk=prod.pk), lambda s: s.state != "pending")
    assert source.state == "synced", source.error
    assert Tenant.objects.get(slug="ours").state != "deleting"
    assert Tenant.objects.get(slug="delta").state not in ("deleting", "deleted")
    assert not AuditEvent.objects.filter(action="tenant.delete").exists()


def test_no_caller_may_name_a_gitops_source_not_even_a_platform_administrator(caller, delta, admin):
    answer = caller(admin).apply(document("Tenant", "delta"), source="gitops:prod")

    assert answer.status_code == 400, answer.text
    assert "'gitops:prod' is reserved" in answer.json()["detail"]
    assert not ManagedObject.objects.exists()


def test_a_signed_in_user_cannot_claim_a_host_cluster_or_a_rate_card(caller, people, admin, demo_fleet):
    rates.create_rate_card(
        actor=CONSOLE,
        name="list-2027",
        effective_from=datetime(2027, 1, 1, tzinfo=UTC),
        prices={"h200-141gb": "3.10"},
    )
    charlie = caller(people["charlie"], scope="write")
    claims = (document("HostCluster", "demo"), document("RateCard", "list-2027", **_card()))

    forged = charlie.apply(*claims, source="evil")
    quiet = charlie.apply(*claims)

    assert forged.status_code == 403, forged.text
    assert quiet.status_code == 200, quiet.text
    assert quiet.json()["changed"] is False, quiet.text
    assert not ManagedObject.objects.exists()
    # the platform's own apply is not refused ("managed by evil")
    platform = caller(admin).apply(document("HostCluster", "demo", region="eu-west"), source="platform")
    assert platform.status_code == 200, platform.text
    assert ManagedObject.objects.get(kind="HostCluster", name="demo").source == "platform"


def _card() -> dict[str, Any]:
    return {"effectiveFrom": "2027-01-01T00:00:00Z", "prices": {"h200-141gb": "3.10"}}


def test_a_tenant_of_someone_else_answers_exactly_like_one_that_does_not_exist(caller, people, admin):
    caller(admin).apply(document("Tenant", "tenant-a", displayName="A"), source="platform-repo")
    assert ManagedObject.objects.get(name="tenant-a").source == "platform-repo"
    charlie = caller(people["charlie"], scope="write")

    answers = [charlie.apply(document("Tenant", slug, displayName="Mine")) for slug in ("tenant-a", "nobody")]

    assert answers[0].status_code == answers[1].status_code == 403
    assert answers[0].json() == answers[1].json()  # the slug is not in the answer: nothing tells them apart
    assert "platform-repo" not in answers[0].text


def test_a_write_scope_token_cannot_add_an_owner_through_apply_either(caller, people, make_user, admin):
    make_user("dave")
    members = [{"user": "alice", "role": "owner"}, {"user": "dave", "role": "owner"}]
    for person in ("alice", "admin"):
        writer = caller(people[person], scope="write")

        through_rest = writer.post("/tenants/tenant-a/members/", {"username": "dave", "role": "owner"})
        through_apply = writer.apply(document("Tenant", "tenant-a", members=members))

        assert through_rest.status_code == 403, (person, through_rest.text)
        assert through_apply.status_code == 403, (person, through_apply.text)
        assert "needs a token with scope 'admin'" in through_apply.json()["detail"]
    assert not Membership.objects.filter(user__username="dave").exists()
    # with the admin scope, the same apply goes through the same check and passes
    assert caller(people["alice"]).apply(document("Tenant", "tenant-a", members=members)).status_code == 200


def test_taking_an_object_over_is_an_explicit_audited_act_of_a_platform_administrator(caller, people, admin):
    platform = caller(admin)
    platform.apply(document("Tenant", "tenant-a", displayName="A"), source="ci")
    alice = caller(people["alice"])

    declared = document("Tenant", "tenant-a", displayName="A")

    refused = platform.apply(declared, source="platform")
    not_hers = alice.apply(declared, takeOwnership=True)
    taken = platform.apply(declared, source="platform", takeOwnership=True)

    assert refused.status_code == 409, refused.text
    assert "managed by ci" in refused.json()["detail"], refused.text
    assert not_hers.status_code == 403, not_hers.text
    assert taken.status_code == 200, taken.text
    assert taken.json()["ownership"] == [
        {"action": "take", "kind": "Tenant", "name": "tenant-a", "previous": "ci", "source": "platform"}
    ]
    event = AuditEvent.objects.get(action="ownership.take")
    assert (event.actor_label, event.tenant, event.before, event.after) == (
        "admin (token attack)",
        people["a"],
        {"source": "ci"},
        {"source": "platform"},
    )


def test_every_claim_is_audited_with_the_real_actor_in_the_tenants_log(caller, delta, admin):
    answer = caller(admin).apply(document("Tenant", "delta"), source="platform")

    assert answer.status_code == 200
    assert answer.json()["changed"] is False
    assert answer.json()["ownership"][0]["action"] == "claim"
    event = AuditEvent.objects.get(action="ownership.claim")
    assert (event.actor_label, event.tenant, event.after) == (
        "admin (token attack)",
        delta,
        {"source": "platform"},
    )


def test_the_default_api_source_prunes_only_what_its_caller_created(
    caller, make_tenant, make_user, admin, celery_worker, settings
):
    settings.SIMULATED_PROVISION_DELAY = settings.SIMULATED_DELETE_DELAY = 0.1
    settings.REQUEUE_DELAY = 0.2
    kept = make_tenant("kept")  # made through the REST API or the portal by someone
    other = make_user("other-admin", staff=True)
    mine, theirs = caller(admin), caller(other)
    made = mine.apply(document("Tenant", "made"), document("Tenant", "kept", displayName="K"))
    assert made.status_code == 200, made.text
    theirs.apply(document("Tenant", "theirs", displayName="Theirs"))

    pruned = mine.apply(prune=True)

    assert pruned.status_code == 200, pruned.text
    assert [(c["name"], c["action"]) for c in pruned.json()["changes"]] == [("made", "delete")]
    assert wait_for(lambda: Tenant.objects.get(slug="made").state, lambda s: s == "deleted") == "deleted"
    kept.refresh_from_db()
    assert kept.state not in ("deleting", "deleted")
    assert kept.display_name == "K"  # renamed, not pruned
    assert Tenant.objects.get(slug="theirs").state not in ("deleting", "deleted")
    assert ManagedObject.objects.get(name="theirs").source == "api:other-admin"


def test_a_token_bound_to_a_source_applies_as_that_source_only(caller, people, admin, live_server):
    service, text = create_service_token(
        actor=Actor.of(admin), tenant=people["a"], name="ci", scope="admin", source="ci-a"
    )
    assert service.source == "ci-a"
    bound = Caller(live_server.url, text)

    answer = bound.apply(document("Tenant", "tenant-a", displayName="Team A"))
    other = bound.apply(document("Tenant", "tenant-a", displayName="Team A"), source="ci-b")
    by_owner = caller(people["alice"]).post(
        "/tenants/tenant-a/tokens/", {"name": "x", "scope": "write", "source": "ci-a"}
    )

    assert answer.status_code == 200, answer.text
    assert answer.json()["source"] == "ci-a", answer.text
    assert other.status_code == 403
    assert "bound to the source 'ci-a'" in other.json()["detail"]
    assert by_owner.status_code == 403
    assert "platform administrators" in by_owner.json()["detail"]
