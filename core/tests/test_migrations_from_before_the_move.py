"""A database made before the packages moved (issue #25) migrates to the head and no table changes.

The moves kept every app label and table name and moved models between apps in Django's state only, so
migrating forward must leave the schema exactly as the old code made it: same tables, columns, indexes,
constraints and triggers. The old code is taken from git (a clone of the repository has it) and migrates a
fresh PostgreSQL database of its own; then today's code migrates the same database.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from tests.tools import server_url, with_database

ROOT = Path(__file__).resolve().parents[2]
# The last commit before the packages moved: main when issue #25's work began.
BEFORE_THE_MOVE = "a3d3ac3"
# The commit issue #25 was read at; issue #24's migrations came after it.
ISSUE_READ_AT = "5bfabbc"


# Migrations after the move that change tables on purpose, as (app, the migration before them): issue 26's
# GPU resource names, API server addresses and dedicated nodes, issue 27's host clusters over time and `Pod`
# (fleet/migrations/0009_… to 0012_…, tenants/migrations/0011_dedicated_nodes.py) and GPU memory per pod
# (billing/migrations/0010_standing_meter_memory.py).
CHANGED_TABLES_SINCE = [
    ("billing", "0009_h25_health_credit_event_in_health"),
    ("tenants", "0010_h25_audit_and_idempotency_to_core"),
    ("scheduling", "0008_h25_health_to_health"),
]


@pytest.fixture
def another_database() -> Iterator[str]:
    """A second new database beside `fresh_database` (tests/fixtures.py), on the same server, dropped
    afterwards."""
    name = f"gpc_move_{uuid.uuid4().hex[:10]}"
    admin = with_database(server_url(), "postgres")
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield with_database(server_url(), name)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


def _tree_at(commit: str, into: Path) -> Path:
    """The repository's files at `commit` (from git: a clone has the history)."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.fail("this test needs git and the repository's history (run it from a clone)")
    into.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", commit], capture_output=True, check=True
    )
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into


@pytest.fixture
def old_tree(tmp_path: Path) -> Path:
    return _tree_at(BEFORE_THE_MOVE, tmp_path / "before")


def _migrate(tree: Path, database: str, *target: str) -> None:
    env = {
        **os.environ,
        "PYTHONPATH": str(tree),
        "DATABASE_URL": database,
        "DJANGO_SETTINGS_MODULE": "gpucloud.settings",
    }
    run = subprocess.run(
        [sys.executable, "manage.py", "migrate", *target, "--noinput", "-v0"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout + run.stderr


def _schema(database: str) -> str:
    dump = subprocess.run(
        ["pg_dump", "--schema-only", "--no-owner", database],
        capture_output=True,
        text=True,
        check=True,
    )
    # pg_dump 15.14+ wraps the dump in \\restrict <random key> ... \\unrestrict: the only lines that differ.
    return "\n".join(
        line for line in dump.stdout.splitlines() if not line.startswith(("\\restrict", "\\unrestrict"))
    )


def _applied(database: str) -> set[tuple[str, str]]:
    with psycopg.connect(database) as conn:
        return {(app, name) for app, name in conn.execute("SELECT app, name FROM django_migrations")}


def test_a_database_from_before_the_move_migrates_to_the_head_and_no_table_changes(fresh_database, old_tree):
    _migrate(old_tree, fresh_database)
    before, applied_before = _schema(fresh_database), _applied(fresh_database)
    _migrate(ROOT, fresh_database)
    applied_after = _applied(fresh_database)
    # Migrations made after the move change tables on purpose: taken back, the schema is the old code's.
    for app, previous in CHANGED_TABLES_SINCE:
        _migrate(ROOT, fresh_database, app, previous)
    assert _schema(fresh_database) == before
    _migrate(ROOT, fresh_database)
    new = applied_after - applied_before
    assert {app for app, _ in new} == {
        "core",
        "health",
        "simulator",
        "tenants",
        "scheduling",
        "workers",
        "billing",
        "inference",  # a new app since: taking tenants back unapplies it with them
    }
    assert applied_before <= applied_after


def test_a_database_from_the_commit_the_issue_was_read_at_migrates_to_the_schema_of_a_new_one(
    fresh_database, another_database, tmp_path
):
    """Issue #24's migrations came between, so tables do change on this way; the result must be exactly the
    schema a database made at the head has."""
    old, new = fresh_database, another_database
    _migrate(_tree_at(ISSUE_READ_AT, tmp_path / "read-at"), old)
    _migrate(ROOT, old)
    _migrate(ROOT, new)
    assert _schema(old) == _schema(new)
