"""The portal says who manages a GitOps-declared tenant and shows the refusal of an edit its next sync would
undo; platform administrators have a page of GitOps sources (issue 24 §7)."""

from __future__ import annotations

import html
import re

import pytest
from django.contrib.messages import get_messages

from core.audit import Actor
from gitops import services
from gitops.models import GitSource
from gitops.tests.gitrepos import declare_tenant
from tenants.models import Tenant

CONSOLE = Actor.console("test")
VISION = """\
apiVersion: gpucloud.io/v1alpha1
kind: Tenant
metadata: {name: vision}
spec:
  displayName: Vision Team
  members: [{user: alice, role: owner}]
  sleep: {whenIdle: false, afterInactivity: 2h}
"""


@pytest.fixture
def platform(repo, demo_fleet, make_user, settings, tmp_path):
    settings.VAR_DIR = tmp_path / "var"
    make_user("alice")
    return declare_tenant(repo, VISION)


def text(response) -> str:
    """The page as read: tags gone, entities decoded, white space collapsed."""
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", response.content.decode())))


def test_a_gitops_tenant_shows_who_manages_it_and_what_is_changed_there(client, platform, repo):
    client.force_login(Tenant.objects.get(slug="vision").memberships.get().user)

    page = text(client.get("/tenants/vision/"))

    assert "managed by GitOps" in page
    assert (
        f"Managed by the GitOps source platform ({repo.url}, branch main, folder tenants). Its displayName, "
        "members, sleep are changed there" in page
    )
    assert "managed by GitOps" in text(client.get("/tenants/vision/members/"))  # every tab of the tenant


def test_a_tenant_nobody_declares_has_no_badge(client, people):
    client.force_login(people["alice"])

    assert "managed-by" not in client.get("/tenants/tenant-a/").content.decode()


def test_an_edit_in_the_portal_that_the_sync_would_undo_is_refused_with_the_reason(client, platform):
    vision = Tenant.objects.get(slug="vision")
    client.force_login(vision.memberships.get().user)

    response = client.post("/tenants/vision/sleep/", {"sleep_after_inactivity": "4h"})

    assert response.status_code == 302
    [message] = [str(m) for m in get_messages(response.wsgi_request)]
    assert message.startswith("changing the sleep settings was refused: Tenant vision is declared by the")
    assert message.endswith("change sleep there")
    vision.refresh_from_db()
    assert vision.sleep_after_inactivity == "2h"


def test_the_gitops_page_shows_state_revision_error_with_file_and_line_and_drift(
    client, admin, platform, repo
):
    good = GitSource.objects.get(pk=platform.pk).last_revision
    Tenant.objects.filter(slug="vision").update(display_name="Renamed by hand")
    repo.commit("drift restored", {"tenants/readme.yaml": ""})
    services.sync(platform)  # restores the name: drift
    bad = repo.commit("broken", {"tenants/vision.yaml": VISION.replace("displayName", "displayname")})
    services.sync(platform)
    client.force_login(admin)

    page = client.get("/gitops/")

    assert page.status_code == 200
    shown = text(page)
    assert "platform failed" in shown
    assert f"Refused {bad[:12]}" in shown
    assert good[:12] != bad[:12]
    assert "tenants/vision.yaml:5 spec.displayname — 'displayname' is not a field of Tenant" in shown
    assert "~ displayName: 'Renamed by hand' → 'Vision Team'" in shown
    assert 'href="/tenants/vision/"' in page.content.decode()


def test_the_gitops_page_is_for_platform_administrators_and_queues_a_sync(
    client, admin, platform, monkeypatch, django_capture_on_commit_callbacks
):
    sent = []
    monkeypatch.setattr("gpucloud.celery.app.send_task", lambda name, args=(), **_: sent.append((name, args)))
    owner = Tenant.objects.get(slug="vision").memberships.get().user  # the tenant's owner, not the platform's
    client.force_login(owner)
    assert client.get("/gitops/").status_code == 403
    assert client.post("/gitops/platform/sync/").status_code == 403

    client.force_login(admin)
    with django_capture_on_commit_callbacks(execute=True):
        queued = client.post("/gitops/platform/sync/")

    assert queued.status_code == 302
    assert sent == [("gitops.sync_source", (platform.pk,))]
    assert client.post("/gitops/nowhere/sync/").status_code == 404
