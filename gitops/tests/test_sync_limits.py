"""Issue 24 §3: a GitOps sync is bounded (files, bytes per file, bytes per commit, time), every way a commit
can be unreadable is a named problem on the source, and errors quote only a little of a value.

Real git repositories; the sync runs as a task in a real Celery worker where the issue saw it stay pending.
"""

from __future__ import annotations

import io
import textwrap
import threading
import time
import tracemalloc
from ipaddress import ip_network

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from gitops import services
from gitops.models import GitSource
from gitops.tests.gitrepos import smart_http
from gitops.tests.test_sync import CONSOLE, tenant
from gpucloud.celery import SYNC_GITOPS_SOURCE, enqueue
from tenants.models import Tenant

DEEP = 50_000


def vision(display_name: str = "Vision Team") -> bytes:
    return textwrap.dedent(tenant("vision", 8, display_name=display_name)).encode()


def deeply_nested() -> bytes:
    return b"apiVersion: gpucloud.io/v1alpha1\nkind: Tenant\nmetadata: {name: deep}\nspec: " + (
        b"[" * DEEP + b"]" * DEEP + b"\n"
    )


def test_ten_thousand_files_are_refused_by_count_without_reading_them(repo, source):
    repo.commit_bytes("many", {f"tenants/t{i:05}.yaml": b"# empty\n" for i in range(10_000)})

    started = time.monotonic()
    synced = services.sync(source)

    assert synced.state == "failed"
    assert synced.error == (
        "10000 manifest files under 'tenants'; a sync reads at most 2000 (GPUCLOUD_GITOPS_MAX_FILES); "
        "nothing was applied"
    )
    assert time.monotonic() - started < 30  # was 80 s, reading each file with its own git process


def test_a_sixty_megabyte_file_is_never_read_and_the_error_stays_short(repo, source, api, admin):
    huge = vision("placeholder").replace(b"placeholder", b"x" * 60_000_000)
    repo.commit_bytes("huge", {"tenants/huge.yaml": huge})

    tracemalloc.start()
    synced = services.sync(source)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()

    assert synced.state == "failed"
    assert synced.problems == [
        {
            "file": "tenants/huge.yaml",
            "line": None,
            "field": "",
            "reason": f"the file has {len(huge)} bytes; a manifest file may have at most "
            "1048576 (GPUCLOUD_GITOPS_MAX_FILE_BYTES)",
        }
    ]
    assert peak < 20_000_000  # the blob was never read into memory (the issue saw 882 MB)
    listing = api(admin).get("/api/v1/gitops/sources/")
    assert len(listing.content) < 5_000


def test_a_long_value_within_the_limits_is_quoted_short_in_the_error_and_its_problems(
    repo, source, api, admin
):
    repo.commit_bytes("long name", {"tenants/vision.yaml": vision("y" * 900_000)})

    synced = services.sync(source)

    assert synced.state == "failed"
    assert "spec.displayName: 'yyyy" in synced.error
    assert "… (900002 characters) is too long" in synced.error
    assert len(synced.error) < 400
    (problem,) = synced.problems
    assert problem["reason"].endswith("is too long")
    assert len(problem["reason"]) < 200
    assert len(api(admin).get("/api/v1/gitops/sources/").content) < 5_000


def test_a_commit_over_the_byte_limit_is_refused_whole(repo, source, settings):
    settings.GITOPS_MAX_COMMIT_BYTES = 400
    repo.commit_bytes(
        "two", {"tenants/a.yaml": vision() + b"# " + b"-" * 200 + b"\n", "tenants/b.yaml": b"# " + b"-" * 200}
    )

    synced = services.sync(source)

    assert synced.state == "failed"
    assert "a sync reads at most 400 (GPUCLOUD_GITOPS_MAX_COMMIT_BYTES); nothing was applied" in synced.error
    assert not Tenant.objects.filter(slug="vision").exists()


def test_a_sync_that_outlasts_its_time_fails_naming_the_limit(repo, demo_fleet, settings, tmp_path):
    settings.VAR_DIR = tmp_path / "var"
    settings.GITOPS_SYNC_TIMEOUT = 1.0
    settings.GITOPS_ALLOWED_NETWORKS = [ip_network("127.0.0.0/8")]
    repo.commit_bytes("add", {"tenants/vision.yaml": vision()})
    bare = tmp_path / "served" / "platform.git"
    bare.parent.mkdir()
    repo.git("clone", "--quiet", "--bare", str(repo.path), str(bare))

    with smart_http(bare.parent, hold=threading.Event()) as server:  # a server that never answers
        source = services.create_source(actor=CONSOLE, name="slow", url=f"{server.url}/platform.git")
        synced = services.sync(source)

    assert synced.state == "failed"
    assert synced.error == (
        "the sync took longer than 1 s (GPUCLOUD_GITOPS_SYNC_TIMEOUT) while fetching; nothing was applied"
    )


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (deeply_nested(), "tenants/deep.yaml:4: nested more than 32 levels deep; a manifest needs a handful"),
        (
            vision().replace(b"Vision Team", b"Vision \xff Team"),
            "tenants/deep.yaml:6: not UTF-8 text (byte 0xff",
        ),
        (
            vision().replace(b"Vision Team", b"2024-13-45"),
            "tenants/deep.yaml:1: a value cannot be read: month",
        ),
    ],
    ids=["nested-50000-deep", "not-utf-8", "impossible-date"],
)
def test_an_unreadable_file_is_a_named_problem_on_the_source(repo, source, content, says):
    commit = repo.commit_bytes("bad", {"tenants/deep.yaml": content})

    synced = services.sync(source)

    assert synced.state == "failed"
    assert synced.error.startswith(f"commit {commit[:12]} was not applied: {says}")


@pytest.mark.worker
def test_in_a_worker_a_deep_document_fails_the_source_instead_of_leaving_it_pending(
    celery_worker, repo, demo_fleet, settings, tmp_path
):
    settings.VAR_DIR = tmp_path / "var"
    repo.commit_bytes("deep", {"tenants/deep.yaml": deeply_nested()})
    source = services.create_source(actor=CONSOLE, name="platform", url=repo.url, path="tenants")

    enqueue(SYNC_GITOPS_SOURCE, source.pk)
    deadline = time.monotonic() + 60
    while GitSource.objects.get(pk=source.pk).state == "pending" and time.monotonic() < deadline:
        time.sleep(0.1)

    synced = GitSource.objects.get(pk=source.pk)
    assert synced.state == "failed"
    assert "tenants/deep.yaml:4: nested more than 32 levels deep" in synced.error
    assert synced.last_attempt_at is not None
    assert source.pk not in [s.pk for s in services.due_sources()]  # not retried at every poll


@pytest.mark.parametrize("command", ["apply", "diff"])
@pytest.mark.parametrize(
    ("content", "says"),
    [
        (deeply_nested(), "bad.yaml:4: nested more than 32 levels deep"),
        (b"kind: Tenant\nmetadata: {name: caf\xe9}\n", "bad.yaml:2: not UTF-8 text (byte 0xe9 at offset 33)"),
    ],
    ids=["nested-50000-deep", "not-utf-8"],
)
def test_apply_and_diff_name_the_problem_without_a_traceback(db, tmp_path, command, content, says):
    manifest = tmp_path / "bad.yaml"
    manifest.write_bytes(content)

    with pytest.raises(CommandError) as refusal:
        call_command(command, "-f", str(manifest), stdout=io.StringIO())

    assert f"{manifest.parent}/{says}" in str(refusal.value)
