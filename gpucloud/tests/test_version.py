"""One version, written in pyproject.toml: the installed package's, shown by the API schema and the CLI, named
by the changelog and by the image tag the Kubernetes manifests deploy."""

from __future__ import annotations

import importlib.metadata
import tomllib
from pathlib import Path

import pytest

import gpucloud
from gpucloud.cli import main

ROOT = Path(__file__).resolve().parents[2]


def declared() -> str:
    version: str = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    return version


def test_the_api_schema_and_the_cli_show_the_installed_version(client, admin, capsys):
    assert gpucloud.__version__ == importlib.metadata.version("gpucloud")
    client.force_login(admin)
    schema = client.get("/api/schema/?format=json").json()
    assert schema["info"]["version"] == gpucloud.__version__
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out == f"gpucloud {gpucloud.__version__}\n"


def test_the_changelog_has_an_entry_for_the_version_in_pyproject():
    changelog = (ROOT / "CHANGELOG.md").read_text()
    unreleased = changelog.split("\n## [Unreleased]\n", 1)[1].split("\n## [", 1)[0]
    version = declared()
    assert f"\n## [{version}] - " in changelog or f"Becomes `{version}`" in unreleased, (
        f"CHANGELOG.md has no section for {version}, and [Unreleased] does not say it becomes {version}"
    )


def test_the_kubernetes_manifests_deploy_the_image_of_this_version():
    for overlay in ("base", "overlays/production"):
        kustomization = (ROOT / "deploy" / "kubernetes" / overlay / "kustomization.yaml").read_text()
        assert f"newTag: {declared()}\n" in kustomization, overlay
