"""Fixtures of the GitOps tests: a source following the test's repository (the repository is `repo`, in
tests/fixtures.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from core.audit import Actor
from gitops import services
from gitops.models import GitSource
from gitops.tests.gitrepos import Repo


@pytest.fixture
def source(repo: Repo, demo_fleet: Any, settings: Any, tmp_path: Path) -> GitSource:
    """The GitOps source `platform`: `repo`'s branch main, manifests under tenants/ (none yet)."""
    settings.VAR_DIR = tmp_path / "var"
    repo.commit("readme", {"README.md": "tenants live in tenants/\n"})
    return services.create_source(
        actor=Actor.console("test"), name="platform", url=repo.url, branch="main", path="tenants"
    )
