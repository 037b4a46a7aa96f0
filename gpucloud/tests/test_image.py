"""The image recipe: deploy/image/build.sh (what the Dockerfile runs) in a clean virtualenv, and the
Dockerfile's promises. No image can be built here (no registry for a base image), so the build steps are
tested by running them, and the installed product is started the way the image starts it.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.tools import PRODUCT_PACKAGES as PRODUCT
from tests.tools import free_port

pytestmark = pytest.mark.wheel

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "deploy" / "image" / "Dockerfile"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    """Run the build script on a copy of what the Dockerfile copies; returns (prefix, var dir, its output)."""
    work = tmp_path_factory.mktemp("image")
    src = work / "src"
    for package in PRODUCT:
        shutil.copytree(ROOT / package, src / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", src)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(GPUCLOUD_VAR_DIR=str(work / "var"), PYTHON=sys.executable)
    done = subprocess.run(
        ["bash", str(ROOT / "deploy" / "image" / "build.sh"), str(src), str(work / "venv")],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return work / "venv", work / "var", done.stdout + done.stderr


def test_the_build_script_installs_the_wheel_and_check_deploy_is_clean(built):
    prefix, _, output = built
    assert "System check identified no issues (0 silenced)." in output
    assert (prefix / "bin" / "gpucloud").exists()
    # The wheel, not the sources: the package imports from the virtualenv.
    where = subprocess.run(
        [prefix / "bin" / "python", "-c", "import gpucloud; print(gpucloud.__file__)"],
        capture_output=True,
        text=True,
        cwd="/",
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )
    assert where.stdout.startswith(str(prefix))


def test_the_build_collects_every_static_file_the_pages_load(built):
    _, var, _ = built
    static = var / "static"
    css = (ROOT / "portal" / "static" / "portal" / "app.css").read_bytes()
    assert (static / "portal" / "app.css").read_bytes() == css
    assert list(static.glob("drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js"))


def test_the_installed_web_serves_the_collected_static_files_with_production_settings(built, tmp_path):
    prefix, var, _ = built
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "DEBUG")}
    env.update(
        GPUCLOUD_VAR_DIR=str(var),
        GPUCLOUD_HTTPS="false",  # plain HTTP on loopback for the test; the image answers behind TLS
        SECRET_KEY="x" * 50,
        GPUCLOUD_WEB_TMP_DIR=str(tmp_path),
        DATABASE_URL=os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres"),
    )
    env.setdefault("GPUCLOUD_ENCRYPTION_KEYS", "Ni1-sjkjCJx0Qm3HT3UxGrSgJjB5bW8-UbrMRRWSR9E=")
    web = subprocess.Popen(
        [prefix / "bin" / "gpucloud", "web", "--bind", f"127.0.0.1:{port}"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        status = 0
        deadline = time.monotonic() + 60
        while status != 200 and time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/static/portal/app.css", timeout=5) as r:
                    status, body = r.status, r.read()
            except OSError:  # refused while gunicorn boots, or a read timed out on a busy machine: ask again
                time.sleep(0.3)
    finally:
        web.send_signal(signal.SIGTERM)
        web.wait(timeout=30)
    assert status == 200
    assert body == (ROOT / "portal/static/portal/app.css").read_bytes()


def instructions() -> list[tuple[str, str]]:
    text = re.sub(r"\\\n\s*", " ", DOCKERFILE.read_text())
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in lines]


def test_the_dockerfile_is_multi_stage_slim_non_root_and_runs_the_build_script():
    steps = instructions()
    froms = [arg for op, arg in steps if op == "FROM"]
    assert len(froms) >= 2
    assert "AS build" in froms[0]
    base = next(arg for op, arg in steps if op == "ARG" and arg.startswith("PYTHON_IMAGE="))
    assert re.fullmatch(r"PYTHON_IMAGE=python:3\.\d+-slim(-\w+)?", base)
    assert ("RUN", "gpucloud-build /src /opt/gpucloud") in steps
    user = [arg for op, arg in steps if op == "USER"]
    assert user
    assert user[-1].split(":")[0].isdigit()
    assert int(user[-1].split(":")[0]) >= 1000
    assert [arg for op, arg in steps if op == "CMD"][-1] == '["gpucloud", "web"]'
    assert any(op == "HEALTHCHECK" and "/healthz" in arg for op, arg in steps)


def test_every_file_the_dockerfile_copies_exists_and_the_fleet_it_names_is_copied():
    steps = instructions()
    copies = [arg.split() for op, arg in steps if op == "COPY" and "--from" not in arg]
    for *sources, _ in copies:
        for source in sources:
            assert (ROOT / source).exists(), f"COPY {source}: no such file"
    env = " ".join(arg for op, arg in steps if op == "ENV")
    fleet = re.search(r"GPUCLOUD_FLEET=(\S+)", env)
    assert fleet, "the image must say where its demo fleet is (it is not in the wheel)"
    copied = {dest.rstrip("/"): src for *srcs, dest in copies for src in srcs}
    directory, name = fleet.group(1).rsplit("/", 1)
    assert (ROOT / copied[directory] / name).exists()
