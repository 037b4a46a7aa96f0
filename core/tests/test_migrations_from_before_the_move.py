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
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from django.conf import settings

ROOT = Path(__file__).resolve().parents[2]
# The last commit before the packages moved: main when issue #25's work began.
BEFORE_THE_MOVE = "a3d3ac3"
# The commit issue #25 was read at; issue #24's migrations came after it.
ISSUE_READ_AT = "5bfabbc"


def _connection_url(name: str) -> str:
    db = settings.DATABASES["default"]
    host, port = db.get("HOST") or "127.0.0.1", db.get("PORT") or 5432
    user = db.get("USER") or "postgres"
    return f"postgresql://{user}@{host}:{port}/{name}"


@pytest.fixture
def database() -> Iterator[str]:
    if settings.DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql":
        pytest.fail("the schema comparison needs PostgreSQL (run the tests through scripts/with-services.sh)")
    name = f"gpucloud_move_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(_connection_url("postgres"), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield name
    with psycopg.connect(_connection_url("postgres"), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def database_factory() -> Iterator[Callable[[], str]]:
    """Fresh PostgreSQL databases of the test's own, dropped afterwards."""
    made: list[str] = []

    def make() -> str:
        name = f"gpucloud_move_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(_connection_url("postgres"), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        made.append(name)
        return name

    yield make
    with psycopg.connect(_connection_url("postgres"), autocommit=True) as conn:
        for name in made:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


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


def _migrate(tree: Path, database: str) -> None:
    env = {
        **os.environ,
        "PYTHONPATH": str(tree),
        "DATABASE_URL": f"postgres://{_connection_url(database).split('://', 1)[1]}",
        "DJANGO_SETTINGS_MODULE": "gpucloud.settings",
    }
    run = subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "-v0"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout + run.stderr


def _schema(database: str) -> str:
    dump = subprocess.run(
        ["pg_dump", "--schema-only", "--no-owner", _connection_url(database)],
        capture_output=True,
        text=True,
        check=True,
    )
    # pg_dump 15.14+ wraps the dump in \\restrict <random key> ... \\unrestrict: the only lines that differ.
    return "\n".join(
        line for line in dump.stdout.splitlines() if not line.startswith(("\\restrict", "\\unrestrict"))
    )


def _applied(database: str) -> set[tuple[str, str]]:
    with psycopg.connect(_connection_url(database)) as conn:
        return {(app, name) for app, name in conn.execute("SELECT app, name FROM django_migrations")}


def test_a_database_from_before_the_move_migrates_to_the_head_and_no_table_changes(database, old_tree):
    _migrate(old_tree, database)
    before, applied_before = _schema(database), _applied(database)
    _migrate(ROOT, database)
    after, applied_after = _schema(database), _applied(database)
    assert after == before
    new = applied_after - applied_before
    assert {app for app, _ in new} == {
        "core",
        "health",
        "simulator",
        "tenants",
        "scheduling",
        "workers",
        "billing",
    }
    assert applied_before <= applied_after


def test_a_database_from_the_commit_the_issue_was_read_at_migrates_to_the_schema_of_a_new_one(
    database_factory, tmp_path
):
    """Issue #24's migrations came between, so tables do change on this way; the result must be exactly the
    schema a database made at the head has."""
    old, new = database_factory(), database_factory()
    _migrate(_tree_at(ISSUE_READ_AT, tmp_path / "read-at"), old)
    _migrate(ROOT, old)
    _migrate(ROOT, new)
    assert _schema(old) == _schema(new)
