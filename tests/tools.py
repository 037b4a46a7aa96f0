"""Helpers shared by the tests that start real tools (oidc-provider, Prometheus, `make run`) or processes
that make their own PostgreSQL database. No Django here: processes that tests spawn import this too."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import NoReturn
from urllib.parse import urlsplit, urlunsplit

import pytest

# The product's packages, lowest layer first (docs/architecture.md, "Layers"): the wheel and image hold them.
PRODUCT_PACKAGES = (
    "gpucloud",
    "core",
    "fleet",
    "tenants",
    "health",
    "placement",
    "inference",
    "billing",
    "clusters",
    "simulator",
    "gitops",
    "portal",
)

# The Kubernetes minor versions host clusters may run: what gpucloud renders must pass kubernetes-validate's
# strict schemas of each (clusters/tests/render/test_render_schemas.py, gitops/tests/test_crds.py).
KUBERNETES_VERSIONS = ("1.32", "1.33", "1.34")

# Debian's Chromium, driven by PyPI playwright (never `playwright install`: nothing is downloaded).
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]


def unavailable(reason: str) -> NoReturn:
    """Under CI a missing tool fails the run; on a developer's machine the test says what to install."""
    if os.environ.get("CI") == "true":
        pytest.fail(reason + " (scripts/install-test-tools.sh installs it)")
    pytest.skip(reason + " (run scripts/install-test-tools.sh)")


def free_port() -> int:
    """A TCP port on loopback that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def server_url() -> str:
    """The PostgreSQL server of DATABASE_URL, for tests whose processes make their own database."""
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith("postgres"):
        pytest.fail("these tests need DATABASE_URL=postgres://… (make test sets it)")
    return url


def with_database(url: str, name: str) -> str:
    """`url` naming database `name` instead."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + name))
