"""GitOps in the portal, in headless Chromium against a live server on PostgreSQL (issue 24 §7): a tenant says
who manages it and refuses an edit the next sync would undo; the GitOps sources page shows state, revision,
the refused commit with file and line, and the drift restored. Screenshots: tenant-managed-by-gitops and
gitops-sources."""

from __future__ import annotations

import pytest

from gitops import services
from gitops.tests.gitrepos import Repo, declare_tenant
from tenants.models import Tenant

VISION = """\
apiVersion: gpucloud.io/v1alpha1
kind: Tenant
metadata: {name: vision}
spec:
  displayName: Vision Team
  members: [{user: alice, role: owner}]
  quotas: [{gpuClass: h200-141gb, guaranteed: 8, burst: 4}]
  sleep: {whenIdle: false, afterInactivity: 2h}
"""


@pytest.fixture
def platform(tmp_path, demo_fleet, make_user, settings):
    settings.GITOPS_FILE_URLS = True
    make_user("alice")
    repo = Repo(tmp_path / "platform")
    return repo, declare_tenant(repo, VISION, webhook_secret="s")


def test_a_gitops_tenant_shows_its_source_and_refuses_an_edit_the_sync_would_undo(browser, platform):
    browser.sign_in("alice")
    browser.go("/tenants/vision/")

    assert browser.page.inner_text("#managed-by") == "managed by GitOps"
    notice = browser.page.inner_text("#managed-notice")
    assert "Managed by the GitOps source platform" in notice
    assert "displayName, members, quotas, sleep are changed there" in notice
    browser.page.fill("#sleep-after", "4h")
    browser.page.click("#save-sleep")
    flash = browser.page.inner_text(".flash-error")
    assert "changing the sleep settings was refused" in flash
    assert "change sleep there" in flash
    assert Tenant.objects.get(slug="vision").sleep_after_inactivity == "2h"
    browser.shot("tenant-managed-by-gitops", narrow=True)


def test_the_gitops_sources_page_shows_a_refused_commit_with_file_and_line_and_the_drift_restored(
    browser, admin, platform
):
    repo, source = platform
    Tenant.objects.filter(slug="vision").update(display_name="Renamed by hand")
    services.sync(source)
    repo.commit("typo", {"tenants/vision.yaml": VISION.replace("burst: 4", "brust: 4")})
    services.sync(source)

    browser.sign_in("admin")
    browser.page.click("nav.primary >> text=Platform")
    browser.page.click("text=GitOps sources")

    assert browser.page.inner_text("#state-platform") == "failed"
    assert "tenants/vision.yaml:7" in browser.page.inner_text("#problems-platform")
    assert "'Renamed by hand' → 'Vision Team'" in browser.page.inner_text("#source-platform")
    assert browser.page.inner_text("#manages-platform") == "vision"
    browser.shot("gitops-sources", narrow=True)
    browser.page.click("#sync-platform")
    assert "A sync of platform is queued" in browser.page.inner_text(".flash-success")
