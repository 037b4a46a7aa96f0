"""`gitops.apply` and `manage.py apply / diff / export`: one transaction, the services' rules, ownership."""

from __future__ import annotations

import io
import textwrap
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import transaction

from billing.models import Budget, RateCard
from billing.services import budgets, rates
from core.audit import Actor
from core.models import AuditEvent
from fleet.models import GpuClass
from gitops.apply import apply
from gitops.manifests import ManifestInvalid, parse, read_texts
from gitops.models import ManagedObject
from tenants import invitations
from tenants.models import Invitation, Membership, Quota, Tenant
from tenants.services import lifecycle
from tenants.services.quotas import set_quota
from tenants.services.sleep import set_sleep_settings

CONSOLE = Actor.console("test")

VISION = """\
apiVersion: gpucloud.io/v1alpha1
kind: Tenant
metadata:
  name: vision
spec:
  displayName: Vision Team
  trustTier: standard
  hostCluster: demo
  members:
    - {user: alice, role: owner}
    - {user: newcomer@example.com, role: member}
  quotas:
    - {gpuClass: h200-141gb, guaranteed: 8, burst: 8, lendable: 0, weight: 1}
    - {gpuClass: h200-141gb.mig-1g.18gb, guaranteed: 14}
  budget: {monthly: "20000.00", currency: USD}
"""


def docs(text: str, file: str = "vision.yaml"):
    return read_texts([(file, textwrap.dedent(text))])


def write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(textwrap.dedent(text))
    return folder / name


@pytest.fixture
def alice(make_user):
    return make_user("alice")


def test_a_tenant_manifest_creates_the_tenant_its_quotas_members_invitation_and_budget(alice, demo_fleet):
    result = apply(docs(VISION), actor=CONSOLE, source="test")

    vision = Tenant.objects.get(slug="vision")
    assert (vision.display_name, vision.trust_tier, vision.cluster.host_cluster.name) == (
        "Vision Team",
        "standard",
        "demo",
    )
    quotas = {q.gpu_class.name: (q.guaranteed, q.burst, q.lendable, q.weight) for q in vision.quotas.all()}
    assert quotas == {"h200-141gb": (8, 8, 0, 1), "h200-141gb.mig-1g.18gb": (14, 0, None, 1)}
    assert Membership.objects.get(tenant=vision, user=alice).role == "owner"
    assert Invitation.objects.get(tenant=vision).login == "newcomer@example.com"
    assert Budget.objects.get(tenant=vision).monthly_amount == 20000
    assert [c.action for c in result.changes] == ["create"]
    assert ManagedObject.objects.get(kind="Tenant", name="vision").source == "test"
    labels = set(AuditEvent.objects.filter(tenant=vision).values_list("actor_label", flat=True))
    assert labels == {"console:test"}


def test_a_quota_over_capacity_applies_nothing_of_the_file_and_names_file_line_and_reason(demo_fleet):
    text = VISION.replace("members:\n    - {user: alice, role: owner}\n", "members:\n")
    second = text.replace("name: vision", "name: speech").replace("guaranteed: 8,", "guaranteed: 60,")
    documents = docs(text + "---\n" + second, "team.yaml")

    with pytest.raises(ManifestInvalid) as refusal:
        apply(documents, actor=CONSOLE, source="test")

    problem = refusal.value.problems[0]
    assert (problem.file, problem.field) == ("team.yaml", "spec.quotas[0]")
    assert problem.line == 27  # the speech document (from line 16): its first quota
    assert "capacity" in problem.reason
    assert refusal.value.status == 422
    assert not Tenant.objects.filter(slug__in=["vision", "speech"]).exists()
    assert not ManagedObject.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_rolled_back_apply_and_a_dry_run_enqueue_nothing(demo_fleet, monkeypatch):
    sent = []
    monkeypatch.setattr(
        "gpucloud.celery.app.send_task", lambda name, args=(), **kw: sent.append((name, args))
    )
    over = VISION.replace("guaranteed: 8,", "guaranteed: 65,").replace(
        "    - {user: alice, role: owner}\n", ""
    )

    with pytest.raises(ManifestInvalid):
        apply(docs(over), actor=CONSOLE, source="test")
    result = apply(
        docs(VISION.replace("    - {user: alice, role: owner}\n", "")),
        actor=CONSOLE,
        source="t",
        dry_run=True,
    )

    assert [c.action for c in result.changes] == ["create"]
    assert not Tenant.objects.filter(slug="vision").exists()
    assert sent == []
    apply(docs(VISION.replace("    - {user: alice, role: owner}\n", "")), actor=CONSOLE, source="t")
    assert sent
    assert all(name == "workers.reconcile_tenant" for name, _ in sent)


def test_an_unknown_user_and_an_unknown_gpu_class_are_both_reported_before_anything_is_written(demo_fleet):
    text = VISION.replace("gpuClass: h200-141gb,", "gpuClass: h900-1tb,")

    with pytest.raises(ManifestInvalid) as refusal:
        apply(docs(text), actor=CONSOLE, source="test")

    found = {(p.field, p.line) for p in refusal.value.problems}
    assert found == {("spec.members[0].user", 10), ("spec.quotas[0].gpuClass", 13)}
    assert "there is no user called 'alice'" in str(refusal.value)
    assert not Tenant.objects.filter(slug="vision").exists()


def test_a_changed_manifest_changes_only_what_differs_and_a_list_given_is_the_whole_list(
    alice, make_user, demo_fleet
):
    make_user("bob")
    apply(docs(VISION), actor=CONSOLE, source="test")
    before = AuditEvent.objects.count()
    changed = (
        VISION.replace("guaranteed: 8,", "guaranteed: 10,")
        .replace("    - {gpuClass: h200-141gb.mig-1g.18gb, guaranteed: 14}\n", "")
        .replace("newcomer@example.com, role: member", "bob, role: viewer")
    )

    result = apply(docs(changed), actor=CONSOLE, source="test")

    vision = Tenant.objects.get(slug="vision")
    assert {q.gpu_class.name: q.guaranteed for q in vision.quotas.all()} == {"h200-141gb": 10}
    assert {m.user.username: m.role for m in vision.memberships.all()} == {"alice": "owner", "bob": "viewer"}
    assert not Invitation.objects.exists()
    paths = [f.path for f in result.changes[0].fields]
    assert paths == [
        "members[bob]",
        "members[newcomer@example.com]",
        "quotas[h200-141gb]",
        "quotas[h200-141gb.mig-1g.18gb]",
    ]
    actions = list(AuditEvent.objects.order_by("id").values_list("action", flat=True)[before:])
    assert sorted(actions) == sorted(
        ["quota.remove", "quota.set", "member.add", "member.uninvite", "manifests.apply"]
    )
    assert apply(docs(changed), actor=CONSOLE, source="test").changes == []
    assert AuditEvent.objects.count() == before + len(actions)  # applying again writes nothing


def test_fields_a_manifest_leaves_out_are_left_alone(people, demo_fleet):
    h200 = GpuClass.objects.get(name="h200-141gb")
    set_quota(actor=CONSOLE, tenant=people["a"], gpu_class=h200, guaranteed=3)
    text = (
        "apiVersion: gpucloud.io/v1alpha1\nkind: Tenant\nmetadata: {name: tenant-a}\nspec: {displayName: A}\n"
    )

    result = apply(docs(text), actor=CONSOLE, source="test")

    assert [str(f) for f in result.changes[0].fields] == ["  ~ displayName: 'tenant-a' → 'A'"]
    tenant = Tenant.objects.get(slug="tenant-a")
    assert tenant.display_name == "A"
    assert tenant.quotas.get().guaranteed == 3
    assert set(tenant.memberships.values_list("user__username", flat=True)) == {"admin", "alice", "bob"}


def test_prune_removes_only_what_the_same_source_applied_and_no_longer_declares(alice, demo_fleet):
    speech = VISION.replace("name: vision", "name: speech").replace(
        "    - {user: newcomer@example.com, role: member}\n", ""
    )
    speech = speech.replace("guaranteed: 8,", "guaranteed: 4,")
    apply(docs(VISION), actor=CONSOLE, source="repo-a")
    apply(docs(speech), actor=CONSOLE, source="repo-b")
    loose = lifecycle.create_tenant(actor=CONSOLE, slug="loose")

    result = apply([], actor=CONSOLE, source="repo-a", prune=True)

    assert [(c.action, c.name) for c in result.changes] == [("delete", "vision")]
    states = dict(Tenant.objects.values_list("slug", "state"))
    assert states["vision"] == "deleting"
    assert states["speech"] != "deleting"
    assert states[loose.slug] == "pending"
    assert not ManagedObject.objects.filter(source="repo-a").exists()


def test_an_object_another_source_owns_is_refused(alice, demo_fleet):
    apply(docs(VISION), actor=CONSOLE, source="repo-a")

    with pytest.raises(ManifestInvalid) as refusal:
        apply(docs(VISION.replace("Vision Team", "Hijacked")), actor=CONSOLE, source="repo-b")

    assert "managed by repo-a" in str(refusal.value)
    assert Tenant.objects.get(slug="vision").display_name == "Vision Team"


@pytest.fixture
def populated(people, demo_fleet, small_fleet):
    """Tenants made through the services as the API would: quotas, members, an invitation, budgets, cards."""
    admin = Actor.of(people["admin"])
    h200 = GpuClass.objects.get(name="h200-141gb")
    set_quota(actor=admin, tenant=people["a"], gpu_class=h200, guaranteed=4, burst=2, lendable=1, weight=3)
    set_quota(actor=admin, tenant=people["b"], gpu_class=GpuClass.objects.get(name="a100-80gb"), guaranteed=2)
    invitations.invite(actor=admin, tenant=people["b"], login="Later@Example.com", role="viewer")
    lifecycle.update_tenant(actor=admin, tenant=people["a"], trust_tier="trusted")
    set_sleep_settings(actor=admin, tenant=people["a"], sleep_when_idle=True, sleep_after_inactivity="4h")
    lifecycle.create_tenant(actor=admin, slug="east", display_name="East", host_cluster=small_fleet)
    budgets.set_budget(actor=admin, tenant=people["a"], monthly_amount="1234.5", enforce=True)
    rates.create_rate_card(
        actor=admin,
        effective_from=datetime(2026, 1, 1, tzinfo=UTC),
        prices={"h200-141gb": "3.10", "a100-80gb": "1.5"},
        tier_multipliers={"isolated": "1.25"},
    )
    rates.create_rate_card(
        actor=admin,
        effective_from=datetime(2026, 6, 1, tzinfo=UTC),
        prices={"h200-141gb": "2.90"},
        name="summer",
    )
    return people


def test_export_then_apply_changes_nothing_on_a_populated_database(populated, tmp_path):
    out = io.StringIO()
    call_command("export", stdout=out)
    manifest = write(tmp_path, "all.yaml", out.getvalue())
    exported = list(yaml.safe_load_all(out.getvalue()))
    kinds = [d["kind"] for d in exported]
    sleep = {d["metadata"]["name"]: d["spec"]["sleep"] for d in exported if d["kind"] == "Tenant"}
    assert sleep["tenant-a"] == {"whenIdle": True, "afterInactivity": "4h"}
    assert sleep["tenant-b"] == {"whenIdle": False, "afterInactivity": ""}
    assert kinds.count("Tenant") == 3
    assert kinds.count("RateCard") == 2
    assert kinds.count("HostCluster") == 2
    audit_rows, cards = AuditEvent.objects.count(), RateCard.objects.count()
    documents = read_texts([(str(manifest), manifest.read_text())])

    result = apply(documents, actor=CONSOLE, source="export")

    assert result.changes == []
    assert RateCard.objects.count() == cards
    # Nothing changed but who owns what: the console's source claimed the 7 objects, each claim audited.
    written = AuditEvent.objects.order_by("id")[audit_rows:]
    assert [e.action for e in written] == ["ownership.claim"] * 7 + ["manifests.apply"]
    assert apply(documents, actor=CONSOLE, source="export").ownership == []
    assert AuditEvent.objects.count() == audit_rows + 8  # the second time, nothing at all
    again = io.StringIO()
    call_command("export", stdout=again)
    assert again.getvalue() == out.getvalue()


def test_export_of_one_tenant_is_that_tenant_only(populated):
    out = io.StringIO()
    call_command("export", "--tenant", "tenant-b", stdout=out)

    (document,) = yaml.safe_load_all(out.getvalue())
    assert document["metadata"]["name"] == "tenant-b"
    assert {"user": "later@example.com", "role": "viewer"} in document["spec"]["members"]


def test_diff_shows_exactly_what_apply_then_does(populated, tmp_path):
    out = io.StringIO()
    call_command("export", "--tenant", "tenant-a", stdout=out)
    document = yaml.safe_load(out.getvalue())
    document["spec"]["displayName"] = "Team A"
    document["spec"]["quotas"][0]["guaranteed"] = 6
    document["spec"]["members"] = [m for m in document["spec"]["members"] if m["user"] != "bob"]
    document["spec"]["sleep"]["afterInactivity"] = "90m"
    folder = tmp_path / "manifests"
    write(folder, "a.yaml", yaml.safe_dump(document))

    shown = io.StringIO()
    with pytest.raises(SystemExit) as exit_code:
        call_command("diff", "-f", str(folder), stdout=shown)
    assert exit_code.value.code == 1
    assert shown.getvalue().splitlines() == [
        "~ Tenant tenant-a",
        "  ~ displayName: 'tenant-a' → 'Team A'",
        "  - members[bob]: 'viewer'",
        "  ~ quotas[h200-141gb]: "
        "{'guaranteed': 4, 'burst': 2, 'lendable': 1, 'weight': 3} → "
        "{'guaranteed': 6, 'burst': 2, 'lendable': 1, 'weight': 3}",
        "  ~ sleep.afterInactivity: '4h' → '90m'",
    ]
    assert Tenant.objects.get(slug="tenant-a").display_name == "tenant-a"  # diff changed nothing

    applied = io.StringIO()
    call_command("apply", "-f", str(folder), stdout=applied)

    assert applied.getvalue().splitlines()[:-1] == shown.getvalue().splitlines()
    tenant = Tenant.objects.get(slug="tenant-a")
    assert tenant.display_name == "Team A"
    assert tenant.quotas.get().guaranteed == 6
    assert not tenant.memberships.filter(user__username="bob").exists()
    assert (tenant.sleep_when_idle, tenant.sleep_after_inactivity) == (True, "90m")
    quiet = io.StringIO()
    call_command("diff", "-f", str(folder), stdout=quiet)  # no SystemExit: nothing differs
    assert quiet.getvalue().strip() == "no differences"


def test_apply_dry_run_and_prune_through_the_command(alice, demo_fleet, tmp_path):
    folder = tmp_path / "repo"
    write(folder, "vision.yaml", VISION)
    out = io.StringIO()
    call_command("apply", "-f", str(folder), "--dry-run", stdout=out)
    assert "1 object(s) would change (dry run)" in out.getvalue()
    assert not Tenant.objects.filter(slug="vision").exists()

    call_command("apply", "-f", str(folder), stdout=io.StringIO())
    (folder / "vision.yaml").write_text("# nothing declared any more\n")
    call_command("apply", "-f", str(folder), "--prune", stdout=io.StringIO())

    assert Tenant.objects.get(slug="vision").state == "deleting"


def test_a_bad_file_makes_the_command_fail_naming_file_line_and_field(demo_fleet, tmp_path):
    bad = write(tmp_path, "bad.yaml", VISION.replace("trustTier: standard", "trustTier: gold"))

    with pytest.raises(CommandError) as refusal:
        call_command("apply", "-f", str(bad))

    assert f"{bad}:7: spec.trustTier: 'gold' is not one of ['isolated', 'standard', 'trusted']" in str(
        refusal.value
    )


def test_a_rate_card_manifest_changed_becomes_a_new_version_under_its_name(demo_fleet):
    card = """\
    apiVersion: gpucloud.io/v1alpha1
    kind: RateCard
    metadata: {name: list-2027}
    spec:
      effectiveFrom: "2027-01-01T00:00:00Z"
      prices: {h200-141gb: "3.00"}
    """
    apply(docs(card), actor=CONSOLE, source="cards")
    assert apply(docs(card.replace("3.00", "3.0")), actor=CONSOLE, source="cards").changes == []

    apply(docs(card.replace("3.00", "2.75")), actor=CONSOLE, source="cards")

    versions = list(
        RateCard.objects.filter(name="list-2027").order_by("version").values_list("prices", flat=True)
    )
    assert versions == [{"h200-141gb": "3.00"}, {"h200-141gb": "2.75"}]


def test_a_host_cluster_manifest_keeps_settings_and_cannot_create_or_change_the_driver(demo_fleet):
    host = """\
    apiVersion: gpucloud.io/v1alpha1
    kind: HostCluster
    metadata: {name: demo}
    spec: {region: eu-west, topologyLevels: [zone, rack]}
    """
    apply(docs(host), actor=CONSOLE, source="hosts")
    demo_fleet.refresh_from_db()
    assert (demo_fleet.region, demo_fleet.topology_levels) == ("eu-west", ["zone", "rack"])

    with pytest.raises(ManifestInvalid) as refusal:
        apply(docs(host.replace("name: demo", "name: nowhere")), actor=CONSOLE, source="hosts")
    assert "manifests carry no credentials" in str(refusal.value)
    with pytest.raises(ManifestInvalid) as refusal:
        apply(docs(host.replace("region: eu-west", "driver: kubernetes")), actor=CONSOLE, source="hosts")
    assert "driver is 'simulated' and is chosen at registration" in str(refusal.value)


def test_an_invitation_becomes_a_membership_at_first_sign_in(demo_fleet, make_user, client):
    apply(docs(VISION.replace("    - {user: alice, role: owner}\n", "")), actor=CONSOLE, source="test")
    newcomer = make_user("newcomer")
    newcomer.email = "NewComer@example.com"
    newcomer.save()

    response = client.post("/login/", {"username": "newcomer", "password": "pw-newcomer"})

    assert response.status_code == 302
    membership = Membership.objects.get(user=newcomer)
    assert (membership.tenant.slug, membership.role, membership.source) == ("vision", "member", "manual")
    assert not Invitation.objects.filter(accepted_at=None).exists()
    assert Invitation.objects.get(login="newcomer@example.com").user == newcomer
    event = AuditEvent.objects.get(action="member.add", object_id="vision/newcomer")
    assert event.actor_label == "system:invitation"
    assert event.after["invited_as"] == "newcomer@example.com"
    # the manifest naming the e-mail address still matches: the invitee is now a user with that address
    assert (
        apply(
            docs(VISION.replace("    - {user: alice, role: owner}\n", "")), actor=CONSOLE, source="test"
        ).changes
        == []
    )


def test_a_manifest_changes_the_role_of_the_portals_invitation_whatever_the_case_of_the_address(
    alice, demo_fleet
):
    without_newcomer = VISION.replace("    - {user: newcomer@example.com, role: member}\n", "")
    apply(docs(without_newcomer), actor=CONSOLE, source="t")
    vision = Tenant.objects.get(slug="vision")
    invitations.invite(actor=Actor.of(alice), tenant=vision, login="NewComer@Example.com", role="viewer")

    result = apply(docs(VISION), actor=CONSOLE, source="t")

    assert [(f.path, f.before, f.after) for f in result.changes[0].fields] == [
        ("members[newcomer@example.com]", "viewer", "member")
    ]
    assert list(Invitation.objects.values_list("login", "role")) == [("NewComer@Example.com", "member")]
    assert apply(docs(VISION), actor=CONSOLE, source="t").changes == []


def test_parse_keeps_lines_and_refuses_repeated_keys():
    (document,) = parse(VISION, "v.yaml")
    assert document.line("spec.quotas[1].guaranteed") == 14
    assert document.line("spec.budget.monthly") == 15

    with pytest.raises(ManifestInvalid) as refusal:
        parse(
            VISION.replace("  trustTier: standard\n", "  trustTier: standard\n  trustTier: trusted\n"),
            "v.yaml",
        )
    assert str(refusal.value.problems[0]) == "v.yaml:8: spec: the key 'trustTier' appears twice"


def test_yaml_aliases_are_refused_before_they_can_expand():
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n"
        for i in range(20)
    )

    with pytest.raises(ManifestInvalid) as refusal:
        parse(bomb, "bomb.yaml")

    first = refusal.value.problems[0]
    assert (first.field, first.reason) == ("b[0]", "YAML anchors and aliases are not allowed in manifests")


@pytest.mark.parametrize(
    ("change", "field", "reason"),
    [
        (
            ("kind: Tenant", "kind: Tenancy"),
            "kind",
            "unknown kind 'Tenancy'; known: HostCluster, RateCard, Tenant",
        ),
        (("gpucloud.io/v1alpha1", "gpucloud.io/v2"), "apiVersion", "'gpucloud.io/v2' is not supported"),
        (
            ("  trustTier: standard", "  trustTier: standard\n  colour: blue"),
            "spec.colour",
            "'colour' is not a field",
        ),
        (("{user: alice,", "{user: 'al ice',"), "spec.members[0].user", "neither a username nor an e-mail"),
        (
            ("guaranteed: 14", "guaranteed: -1"),
            "spec.quotas[1].guaranteed",
            "-1 is less than the minimum of 0",
        ),
        (
            ("  budget:", "  sleep: {afterInactivity: 4 hours}\n  budget:"),
            "spec.sleep.afterInactivity",
            "'4 hours' is not a delay; write it like 45m, 2h or 1h30m",
        ),
        (
            ("  budget:", "  sleep: {whenIdle: yes please}\n  budget:"),
            "spec.sleep.whenIdle",
            "is not of type 'boolean'",
        ),
    ],
)
def test_bad_documents_are_refused_naming_the_field_and_why(change, field, reason):
    with pytest.raises(ManifestInvalid) as refusal:
        docs(VISION.replace(*change))

    problem = refusal.value.problems[0]
    assert problem.field == field
    assert reason in problem.reason
    assert problem.line is not None


def test_nothing_is_half_applied_when_a_later_step_of_the_same_tenant_fails(alice, demo_fleet):
    text = VISION.replace("trustTier: standard", "trustTier: isolated")  # a MIG quota is not for isolated

    with pytest.raises(ManifestInvalid) as refusal, transaction.atomic():
        apply(docs(text), actor=CONSOLE, source="test")

    assert refusal.value.problems[0].field == "spec.quotas[1]"
    assert "isolated" in refusal.value.problems[0].reason
    assert not Tenant.objects.filter(slug="vision").exists()
    assert not Quota.objects.exists()


SLEEPY = VISION + "  sleep: {whenIdle: true, afterInactivity: 1h30m}\n"


def test_a_manifest_sets_the_sleep_settings_through_the_service_and_a_partial_one_means_the_defaults(
    alice, demo_fleet
):
    result = apply(docs(SLEEPY), actor=CONSOLE, source="test")

    vision = Tenant.objects.get(slug="vision")
    assert (vision.sleep_when_idle, vision.sleep_after_inactivity) == (True, "1h30m")
    assert "sleep" in [f.path for f in result.changes[0].fields]
    event = AuditEvent.objects.get(tenant=vision, action="tenant.sleep_settings")
    assert event.after == {"sleep_after_inactivity": "1h30m", "sleep_when_idle": True}
    assert apply(docs(SLEEPY), actor=CONSOLE, source="test").changes == []

    result = apply(docs(VISION + "  sleep: {afterInactivity: 2h}\n"), actor=CONSOLE, source="test")

    assert [str(f) for f in result.changes[0].fields] == [
        "  ~ sleep.afterInactivity: '1h30m' → '2h'",
        "  ~ sleep.whenIdle: True → False",
    ]
    vision.refresh_from_db()
    assert (vision.sleep_when_idle, vision.sleep_after_inactivity) == (False, "2h")
    apply(docs(VISION), actor=CONSOLE, source="test")  # `sleep` left out: not managed, left alone
    vision.refresh_from_db()
    assert (vision.sleep_when_idle, vision.sleep_after_inactivity) == (False, "2h")


def test_a_sleep_delay_under_a_minute_is_refused_with_its_field_and_nothing_is_written(alice, demo_fleet):
    apply(docs(VISION), actor=CONSOLE, source="test")
    before = AuditEvent.objects.count()
    text = VISION.replace("Vision Team", "Vision").replace("guaranteed: 8,", "guaranteed: 9,")
    text += "  sleep: {whenIdle: true, afterInactivity: 30s}\n"

    with pytest.raises(ManifestInvalid) as refusal:
        apply(docs(text), actor=CONSOLE, source="test")

    (problem,) = refusal.value.problems
    assert (problem.field, problem.line) == ("spec.sleep.afterInactivity", 16)
    assert "'30s' is not a delay of at least a minute" in problem.reason
    assert refusal.value.status == 400
    vision = Tenant.objects.get(slug="vision")
    assert (vision.display_name, vision.quotas.get(gpu_class__name="h200-141gb").guaranteed) == (
        "Vision Team",
        8,
    )
    assert (vision.sleep_when_idle, vision.sleep_after_inactivity) == (False, "")
    assert AuditEvent.objects.count() == before
