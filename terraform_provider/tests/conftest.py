"""The real `terraform` against a live gpucloud: the provider built as `make terraform-provider` builds it,
and a working directory with gpucloud's endpoint and an administrator's token in the environment.

Terraform is run with subprocess, not tftest: the tests need the exit code of `plan -detailed-exitcode`
(0 nothing to do, 2 changes) and the error text of a refused plan or apply, and tftest raises instead of
returning either.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tenants.tokens import create_token
from terraform_provider.build import build
from tests.fixtures import SYSTEM
from tests.tools import unavailable

TERRAFORM = shutil.which("terraform") or "/usr/local/bin/terraform"  # 1.11.4 on these machines


@pytest.fixture(scope="module")
def terraform_binary() -> str:
    if shutil.which(TERRAFORM) is None:
        unavailable("terraform 1.11 is not installed")
    return TERRAFORM


@pytest.fixture(scope="module")
def cli_config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What `make terraform-provider` builds, built into a temporary directory."""
    return build(tmp_path_factory.mktemp("terraform"))


class Terraform:
    """`terraform` in one working directory, offline, with gpucloud's endpoint and token in its env."""

    def __init__(self, workdir: Path, cli_config: Path, endpoint: str, token: str):
        self.workdir = workdir
        self.env = {
            "PATH": os.environ["PATH"],
            "HOME": os.environ.get("HOME", str(workdir)),
            "TF_CLI_CONFIG_FILE": str(cli_config),
            "CHECKPOINT_DISABLE": "1",
            "TF_IN_AUTOMATION": "1",
            "TF_INPUT": "0",
            "GPUCLOUD_ENDPOINT": endpoint,
            "GPUCLOUD_TOKEN": token,
        }

    def popen(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [TERRAFORM, *args, "-no-color"],
            cwd=self.workdir,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )

    def write(self, hcl: str) -> None:
        (self.workdir / "main.tf").write_text(textwrap.dedent(hcl))

    def run(self, *args: str, expect: int | None = 0) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [TERRAFORM, *args, "-no-color"],
            cwd=self.workdir,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if expect is not None:
            assert done.returncode == expect, (
                f"terraform {args[0]}: {done.returncode}\n{done.stdout}\n{done.stderr}"
            )
        return done

    def plan(self, expect: int) -> str:
        """`plan -detailed-exitcode`: 0 nothing to do, 1 an error, 2 changes."""
        done = self.run("plan", "-detailed-exitcode", expect=expect)
        return done.stdout + done.stderr

    def apply(self, expect: int = 0) -> str:
        done = self.run("apply", "-auto-approve", expect=expect)
        return done.stdout + done.stderr


@pytest.fixture
def terraform(
    terraform_binary: str,
    tmp_path: Path,
    cli_config: Path,
    live_server: Any,
    celery_worker: Any,
    admin: Any,
    demo_fleet: Any,
    settings: Any,
) -> Terraform:
    settings.SIMULATED_PROVISION_DELAY = 0.3
    settings.SIMULATED_DELETE_DELAY = 0.2
    settings.REQUEUE_DELAY = 0.1
    _, token = create_token(actor=SYSTEM, user=admin, name="terraform", scope="admin")
    return Terraform(tmp_path, cli_config, live_server.url, token)


PROVIDER = """
    terraform {
      required_providers {
        gpucloud = { source = "gpucloud.io/gpucloud/gpucloud" }
      }
    }
"""
