"""The layers of docs/architecture.md hold, and the check enforcing them (import-linter) catches a break."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.tools import PRODUCT_PACKAGES

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = (*PRODUCT_PACKAGES, "tests", "benchmarks", "terraform_provider")
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"],
        cwd=root,
        env={"PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
    )


def copy_of_the_tree(tmp_path: Path) -> Path:
    ignore = shutil.ignore_patterns("node_modules", "__pycache__", "*.csv", "*.prom", "*.json")
    for package in PACKAGES:
        shutil.copytree(ROOT / package, tmp_path / package, ignore=ignore)
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    return tmp_path


def test_the_tree_keeps_every_import_contract():
    run = lint_imports(ROOT)
    assert run.returncode == 0, run.stdout + run.stderr


def test_the_base_layer_importing_a_domain_app_breaks_the_layers(tmp_path):
    tree = copy_of_the_tree(tmp_path)
    with (tree / "gpucloud" / "ids.py").open("a") as f:
        f.write("\nfrom tenants.models import Tenant  # noqa: E402, F401\n")
    run = lint_imports(tree)
    assert run.returncode == 1
    assert "a lower layer never imports a higher one" in run.stdout
    assert "BROKEN" in run.stdout
    assert "gpucloud.ids -> tenants.models" in run.stdout


def test_a_new_module_in_the_fleet_importing_tenants_breaks_the_layers(tmp_path):
    """Lines name packages, so a module nobody listed is checked as soon as it exists."""
    tree = copy_of_the_tree(tmp_path)
    (tree / "fleet" / "brand_new.py").write_text("from tenants.models import Tenant  # noqa: F401\n")
    run = lint_imports(tree)
    assert run.returncode == 1
    assert "fleet.brand_new -> tenants.models" in run.stdout


def test_two_apps_on_one_line_importing_each_other_breaks_the_layers(tmp_path):
    tree = copy_of_the_tree(tmp_path)
    with (tree / "billing" / "money.py").open("a") as f:
        f.write("\nfrom clusters import tasks  # noqa: E402, F401\n")
    run = lint_imports(tree)
    assert run.returncode == 1
    assert "billing.money -> clusters.tasks" in run.stdout


def test_a_driver_importing_the_reconciler_breaks_the_clusters_layers(tmp_path):
    tree = copy_of_the_tree(tmp_path)
    with (tree / "clusters" / "drivers" / "simulated.py").open("a") as f:
        f.write("\nfrom clusters.reconcile import tenants  # noqa: E402, F401\n")
    run = lint_imports(tree)
    assert run.returncode == 1
    assert "Inside clusters" in run.stdout
    assert "clusters.drivers.simulated -> clusters.reconcile.tenants" in run.stdout


def test_one_driver_importing_another_breaks_their_independence(tmp_path):
    tree = copy_of_the_tree(tmp_path)
    with (tree / "clusters" / "drivers" / "gpu_operator.py").open("a") as f:
        f.write("\nfrom clusters.drivers import kubernetes  # noqa: E402, F401\n")
    run = lint_imports(tree)
    assert run.returncode == 1
    assert "Each driver stands alone: no driver imports another BROKEN" in run.stdout


def test_product_code_importing_a_test_tool_breaks_the_product_contract(tmp_path):
    tree = copy_of_the_tree(tmp_path)
    with (tree / "gpucloud" / "kube" / "api.py").open("a") as f:
        f.write("\nfrom tests.kube_emulator import start_emulator  # noqa: E402, F401\n")
    run = lint_imports(tree)
    assert run.returncode == 1
    assert "Product code imports no test tool, benchmark or dev-only library BROKEN" in run.stdout
    assert "gpucloud.kube.api -> tests.kube_emulator" in run.stdout


def test_the_terraform_provider_importing_django_or_an_app_breaks_its_contract(tmp_path):
    tree = copy_of_the_tree(tmp_path)
    with (tree / "terraform_provider" / "client.py").open("a") as f:
        f.write(
            "\nfrom tenants.models import Tenant  # noqa: E402, F401\nimport django  # noqa: E402, F401\n"
        )
    run = lint_imports(tree)
    assert run.returncode == 1
    assert "no gpucloud app BROKEN" in run.stdout
    assert "terraform_provider.client -> tenants.models" in run.stdout
    assert "terraform_provider.client -> django" in run.stdout
