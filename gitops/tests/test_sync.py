"""GitOps sync from real git repositories: over file://, and a local smart-HTTP server with credentials."""

from __future__ import annotations

import hashlib
import hmac
import io
import json
import textwrap
from ipaddress import ip_network

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from core.audit import Actor
from core.models import AuditEvent
from gitops import services
from gitops.models import GitSource, ManagedObject
from gitops.tests.gitrepos import smart_http
from tenants.models import Tenant

CONSOLE = Actor.console("test")


def tenant(slug: str, guaranteed: int, display_name: str = "Vision Team") -> str:
    return f"""\
    apiVersion: gpucloud.io/v1alpha1
    kind: Tenant
    metadata:
      name: {slug}
    spec:
      displayName: {display_name}
      trustTier: standard
      quotas:
        - {{gpuClass: h200-141gb, guaranteed: {guaranteed}, burst: 4}}
    """


def h200_quota(slug: str) -> int:
    return Tenant.objects.get(slug=slug).quotas.get(gpu_class__name="h200-141gb").guaranteed


def test_a_source_follows_its_repository_commit_by_commit(repo, source):
    added = repo.commit(
        "add vision", {"tenants/vision.yaml": tenant("vision", 8), "docs/x.yaml": "not: ours"}
    )
    synced = services.sync(source)
    assert (synced.state, synced.last_revision, synced.error) == ("synced", added, "")
    assert h200_quota("vision") == 8
    assert AuditEvent.objects.filter(action="tenant.create", actor_label="system:gitops:platform").exists()

    changed = repo.commit("grow vision", {"tenants/vision.yaml": tenant("vision", 12)})
    assert services.sync(source).last_revision == changed
    assert h200_quota("vision") == 12

    audit_rows = AuditEvent.objects.count()
    services.sync(source)  # the same commit again: nothing to do, nothing written
    assert AuditEvent.objects.count() == audit_rows

    removed = repo.commit(
        "vision goes, speech comes", {"tenants/vision.yaml": None, "tenants/speech.yaml": tenant("speech", 2)}
    )
    synced = services.sync(source)
    assert (synced.state, synced.last_revision) == ("synced", removed)
    assert Tenant.objects.get(slug="vision").state == "deleting"  # pruned
    assert h200_quota("speech") == 2
    assert set(ManagedObject.objects.values_list("name", flat=True)) == {"speech"}


def test_a_bad_commit_applies_nothing_and_the_source_says_why(repo, source):
    good = repo.commit("add vision", {"tenants/vision.yaml": tenant("vision", 8)})
    services.sync(source)

    bad = repo.commit(
        "grow vision, add a broken tenant",
        {
            "tenants/vision.yaml": tenant("vision", 16),
            "tenants/zeta.yaml": tenant("zeta", 1).replace(
                "trustTier: standard", "trustTier: standard\n      colour: red"
            ),
        },
    )
    synced = services.sync(source)

    assert synced.state == "failed"
    assert synced.last_revision == good
    assert synced.last_attempted_revision == bad
    assert synced.error.startswith(f"commit {bad[:12]} was not applied: tenants/zeta.yaml:8: spec.colour:")
    assert synced.problems == [
        {
            "file": "tenants/zeta.yaml",
            "line": 8,
            "field": "spec.colour",
            "reason": "'colour' is not a field of Tenant; allowed here: budget, displayName, hostCluster, "
            "members, quotas, sleep, trustTier",
        }
    ]
    assert h200_quota("vision") == 8
    assert not Tenant.objects.filter(slug="zeta").exists()

    with pytest.raises(CommandError) as refusal:
        call_command("gitops", "sync", "platform", stderr=io.StringIO())
    assert "sync of platform failed: commit" in str(refusal.value)


def test_a_commit_over_capacity_is_refused_whole_with_the_services_reason(repo, source):
    repo.commit("add vision", {"tenants/vision.yaml": tenant("vision", 8)})
    services.sync(source)
    repo.commit(
        "two more",
        {"tenants/a.yaml": tenant("alpha", 4), "tenants/b.yaml": tenant("beta", 60)},
    )

    synced = services.sync(source)

    assert synced.state == "failed"
    assert "tenants/b.yaml:9: spec.quotas[0]:" in synced.error
    assert "at most 52 can be guaranteed" in synced.error
    assert not Tenant.objects.filter(slug__in=["alpha", "beta"]).exists()


def test_a_change_made_behind_the_services_back_is_reported_as_drift_and_restored(repo, source):
    repo.commit("add vision", {"tenants/vision.yaml": tenant("vision", 8)})
    services.sync(source)
    vision = Tenant.objects.get(slug="vision")
    # Through the services (API, portal) such a change is refused (tenants/tests/test_declared.py); in the
    # database directly it is drift.
    Tenant.objects.filter(pk=vision.pk).update(display_name="Renamed by hand")
    vision.quotas.filter(gpu_class__name="h200-141gb").update(guaranteed=2, burst=0)

    synced = services.sync(source)

    assert synced.state == "synced"
    assert synced.drift == [
        "~ Tenant vision\n"
        "  ~ displayName: 'Renamed by hand' → 'Vision Team'\n"
        # the burst changed too: restored as well
        "  ~ quotas[h200-141gb]: {'guaranteed': 2, 'burst': 0, 'lendable': None, 'weight': 1} → "
        "{'guaranteed': 8, 'burst': 4, 'lendable': None, 'weight': 1}"
    ]
    vision.refresh_from_db()
    assert vision.display_name == "Vision Team"
    assert h200_quota("vision") == 8
    assert AuditEvent.objects.filter(action="gitops.drift_restored", object_id="platform").count() == 1
    assert services.sync(source).drift == []


def test_an_unreachable_repository_fails_the_sync_with_gits_reason(source, tmp_path):
    GitSource.objects.filter(pk=source.pk).update(url=f"file://{tmp_path}/nowhere")

    synced = services.sync(source)

    assert synced.state == "failed"
    assert synced.error.startswith("git fetch failed:")
    assert "Could not read from remote repository" in synced.error


def test_a_folder_without_manifests_prunes_nothing(repo, source):
    repo.commit("add vision", {"tenants/vision.yaml": tenant("vision", 8)})
    services.sync(source)
    repo.commit("oops", {"tenants/vision.yaml": None})

    synced = services.sync(source)

    assert synced.state == "failed"
    assert "nothing was pruned" in synced.error
    assert Tenant.objects.get(slug="vision").state != "deleting"


def test_a_source_over_smart_https_needs_its_credentials(repo, demo_fleet, settings, tmp_path):
    settings.VAR_DIR = tmp_path / "var"
    settings.GITOPS_ALLOWED_NETWORKS = [ip_network("127.0.0.1/32")]  # the test's own git server
    repo.commit("add vision", {"tenants/vision.yaml": tenant("vision", 8)})
    bare = tmp_path / "served" / "platform.git"
    bare.parent.mkdir()
    repo.git("clone", "--quiet", "--bare", str(repo.path), str(bare))
    with smart_http(bare.parent, "deploy:s3cret-token", tls_dir=tmp_path / "tls") as served:
        settings.GITOPS_CA_FILE = str(served.ca_file)
        base = served.url
        wrong = services.create_source(
            actor=CONSOLE,
            name="wrong",
            url=f"{base}/platform.git",
            path="tenants",
            username="deploy",
            password="no",
        )
        right = services.create_source(
            actor=CONSOLE,
            name="right",
            url=f"{base}/platform.git",
            path="tenants",
            username="deploy",
            password="s3cret-token",
        )

        refused, synced = services.sync(wrong), services.sync(right)

    assert refused.state == "failed"
    assert "the git server refused the credentials given" in refused.error
    assert "s3cret" not in refused.error
    assert synced.state == "synced"
    assert h200_quota("vision") == 8


def sign(secret: str, body: bytes) -> str:
    return hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


@pytest.fixture
def hooked(source):
    return services.update_source(actor=CONSOLE, source=source, webhook_secret="hook-secret")


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        (lambda body: {"HTTP_X_HUB_SIGNATURE_256": "sha256=" + sign("hook-secret", body)}, 202),
        (lambda body: {"HTTP_X_GITEA_SIGNATURE": sign("hook-secret", body)}, 202),
        (lambda body: {"HTTP_X_GITLAB_TOKEN": "hook-secret"}, 202),
        (lambda body: {"HTTP_X_HUB_SIGNATURE_256": "sha256=" + sign("other-secret", body)}, 404),
        (lambda body: {"HTTP_X_GITLAB_TOKEN": "hook-secre"}, 404),
        (lambda body: {}, 404),
    ],
)
def test_a_push_webhook_triggers_a_sync_only_when_signed(
    hooked, client, monkeypatch, django_capture_on_commit_callbacks, headers, status
):
    sent = []
    monkeypatch.setattr(
        "gpucloud.celery.app.send_task", lambda name, args=(), **kw: sent.append((name, args))
    )
    body = json.dumps({"ref": "refs/heads/main", "after": "abc"}).encode()

    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            "/api/v1/gitops/sources/platform/webhook/", body, content_type="application/json", **headers(body)
        )

    assert response.status_code == status, response.content
    assert sent == ([("gitops.sync_source", (hooked.pk,))] if status == 202 else [])
    if status == 404:  # exactly as a source that does not exist (gitops/tests/test_webhook.py)
        assert response["Content-Type"] == "application/problem+json"


def test_a_push_to_another_branch_is_acknowledged_and_ignored(hooked, client, monkeypatch):
    sent = []
    monkeypatch.setattr("gpucloud.celery.app.send_task", lambda name, args=(), **kw: sent.append(name))
    body = json.dumps({"ref": "refs/heads/feature"}).encode()

    response = client.post(
        "/api/v1/gitops/sources/platform/webhook/",
        body,
        content_type="application/json",
        HTTP_X_HUB_SIGNATURE_256="sha256=" + sign("hook-secret", body),
    )

    assert response.status_code == 202
    assert response.json()["queued"] is False
    assert sent == []


def test_the_periodic_task_syncs_the_sources_that_are_due(repo, source, monkeypatch):
    from gitops import tasks

    repo.commit("add vision", {"tenants/vision.yaml": tenant("vision", 8)})
    monkeypatch.setattr(tasks, "enqueue", lambda name, source_id: tasks.sync_source(source_id))

    tasks.sync_due_sources()
    assert GitSource.objects.get(pk=source.pk).state == "synced"
    assert h200_quota("vision") == 8

    repo.commit("grow", {"tenants/vision.yaml": tenant("vision", 9)})
    tasks.sync_due_sources()  # not due: its interval has not passed
    assert h200_quota("vision") == 8


def test_the_gitops_command_adds_and_syncs_a_source(repo, demo_fleet, settings, tmp_path, monkeypatch):
    settings.VAR_DIR = tmp_path / "var"
    repo.commit("add vision", {"tenants/vision.yaml": tenant("vision", 8)})
    monkeypatch.setenv("REPO_TOKEN", "t0ken")
    out = io.StringIO()

    call_command(
        "gitops", "add", "cli", "--url", repo.url, "--branch", "main", "--path", "tenants", "--password-env",
        "REPO_TOKEN", stdout=out,
    )  # fmt: skip
    call_command("gitops", "sync", "cli", stdout=out)

    assert "cli synced at" in out.getvalue()
    assert h200_quota("vision") == 8
    assert GitSource.objects.get(name="cli").password_ciphertext not in ("", "t0ken")


def test_the_api_registers_sources_for_platform_administrators_and_hides_secrets(
    api, admin, people, settings
):
    body = {
        "name": "api",
        "url": "https://git.example.com/platform.git",
        "password": "pw-9",
        "webhook_secret": "w",
    }
    assert api(people["alice"]).post("/api/v1/gitops/sources/", body, format="json").status_code == 403

    created = api(admin).post("/api/v1/gitops/sources/", body, format="json")

    assert created.status_code == 201, created.json()
    shown = api(admin).get("/api/v1/gitops/sources/api/").json()
    assert shown["has_password"]
    assert shown["has_webhook_secret"]
    assert "password" not in shown
    assert shown["state"] == "pending"
    assert shown["last_revision"] == ""
    local = api(admin).post(
        "/api/v1/gitops/sources/", {**body, "name": "local", "url": "file:///etc"}, format="json"
    )
    assert local.status_code == 400
    assert "file:// URLs read the server's own disk" in local.json()["detail"]
    inline = api(admin).post(
        "/api/v1/gitops/sources/",
        {**body, "name": "x", "url": "https://u:p@git.example.com/r.git"},
        format="json",
    )
    assert inline.status_code == 400
    assert "not in the URL" in inline.json()["detail"]


def test_a_source_takes_over_what_another_source_manages_only_when_the_console_says_so(
    repo, source, tmp_path
):
    legacy = tmp_path / "legacy.yaml"
    legacy.write_text(textwrap.dedent(tenant("vision", 8)))
    call_command("apply", "-f", str(legacy), "--source", "legacy", stdout=io.StringIO())
    repo.commit("add vision", {"tenants/vision.yaml": tenant("vision", 12)})

    refused = services.sync(source)
    out = io.StringIO()
    call_command("gitops", "sync", "platform", "--take-ownership", stdout=out)

    assert refused.state == "failed"
    assert "Tenant vision is managed by legacy" in refused.error
    assert "platform synced at" in out.getvalue()
    assert h200_quota("vision") == 12
    assert ManagedObject.objects.get(name="vision").source == "gitops:platform"
    taken = AuditEvent.objects.get(action="ownership.take")
    assert (taken.actor_label, taken.before, taken.after["source"]) == (
        "console:gitops sync --take-ownership",
        {"source": "legacy"},
        "gitops:platform",
    )


def test_the_console_cannot_apply_as_a_gitops_source_either(source, tmp_path):
    manifest = tmp_path / "vision.yaml"
    manifest.write_text("")

    with pytest.raises(CommandError, match="'gitops:platform' is reserved"):
        call_command("apply", "-f", str(manifest), "--source", "gitops:platform", stdout=io.StringIO())
