"""The installed package: built as a wheel and installed without dev extras into a fresh virtualenv, every
module of it imports. So no test tool, benchmark or dev-only library ships, and nothing shipped needs one."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.tools import PRODUCT_PACKAGES as PRODUCT

pytestmark = pytest.mark.wheel

ROOT = Path(__file__).resolve().parents[1]
DEV_ONLY = ("kmock", "pytest", "pytest_django", "hypothesis", "playwright", "schemathesis", "highspy")
IMPORT_ALL = """
import importlib, pkgutil, django
django.setup()
names = []
for top in {product!r}:
    names += [top] + [m.name for m in pkgutil.walk_packages(importlib.import_module(top).__path__, top + ".")]
for name in names:
    importlib.import_module(name)
print(len(names))
"""


def run(*cmd: str | Path, cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True)
    assert done.returncode == 0, f"{cmd} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment (pip's index settings included) without the checkout on the path."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return env | extra


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel, built from a copy of the sources (an in-tree build/ could carry files deleted since)."""
    src = tmp_path_factory.mktemp("src")
    for package in PRODUCT:
        shutil.copytree(ROOT / package, src / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", src)
    run(sys.executable, "-m", "pip", "wheel", ".", "--no-deps", "-q", "-w", "dist", cwd=src, env=clean_env())
    return next((src / "dist").glob("gpucloud-*.whl"))


@pytest.fixture(scope="module")
def python(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The interpreter of a fresh virtualenv with the wheel and its runtime dependencies, no dev extras."""
    venv = tmp_path_factory.mktemp("venv")
    run(sys.executable, "-m", "venv", venv, cwd=venv)
    run(venv / "bin" / "python", "-m", "pip", "install", "-q", wheel, cwd=venv, env=clean_env())
    return venv / "bin" / "python"


def test_the_wheel_holds_the_product_packages_and_no_tests_or_benchmarks(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names if not n.startswith("gpucloud-")} == set(PRODUCT)
    assert not [n for n in names if "/tests/" in n or "bench" in n or "emulator" in n]


def test_the_wheel_carries_the_portal_templates_and_static_files(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    shipped = {str(p.relative_to(ROOT)) for p in (ROOT / "portal").glob("*/portal/*") if p.is_file()}
    assert shipped
    assert shipped <= names


def test_no_dev_only_library_comes_with_the_package(python, tmp_path):
    check = f"import importlib.util; print([m for m in {DEV_ONLY!r} if importlib.util.find_spec(m)])"
    assert run(python, "-c", check, cwd=tmp_path, env=clean_env()).strip() == "[]"


def test_every_module_of_the_installed_package_imports_without_dev_extras(python, tmp_path):
    env = clean_env(DJANGO_SETTINGS_MODULE="gpucloud.settings", GPUCLOUD_VAR_DIR=str(tmp_path / "var"))
    for name in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL"):
        env.pop(name, None)
    imported = run(python, "-c", IMPORT_ALL.format(product=PRODUCT), cwd=tmp_path, env=env)
    assert int(imported) > 100
