"""Issue 24 §2: a GitOps source reaches only public addresses (or networks the operator allows), git connects
to the addresses that were checked, and credentials never travel over plain http://.

The git servers are real (`git http-backend`, gitops/tests/gitrepos.py); registration goes over real HTTP.
"""

from __future__ import annotations

import socket
from ipaddress import ip_network

import pytest
import requests

from core.audit import Actor
from gitops import services
from gitops.models import GitSource
from gitops.tests.gitrepos import Repo, smart_http
from gitops.tests.test_sync import CONSOLE, h200_quota, tenant
from gpucloud import crypto
from gpucloud.errors import ValidationFailed
from tenants.tokens import create_token


@pytest.fixture
def served(tmp_path, settings, demo_fleet):
    """A bare repository with one tenant in tenants/, served at tmp_path/served; VAR_DIR under tmp_path."""
    settings.VAR_DIR = tmp_path / "var"
    repo = Repo(tmp_path / "platform")
    repo.commit("add vision", {"tenants/vision.yaml": tenant("vision", 8)})
    bare = tmp_path / "served" / "platform.git"
    bare.parent.mkdir()
    repo.git("clone", "--quiet", "--bare", str(repo.path), str(bare))
    return bare.parent


@pytest.fixture
def register(live_server, admin):
    """POST /api/v1/gitops/sources/ over real HTTP as a platform administrator."""
    _, token = create_token(actor=Actor.system("test"), user=admin, name="ci", scope="admin")

    def post(**body: str) -> requests.Response:
        return requests.post(
            f"{live_server.url}/api/v1/gitops/sources/",
            json={"name": "platform", **body},
            headers={"Authorization": f"Bearer {token}"},
            timeout=30,
        )

    return post


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("https://169.254.169.254/latest/meta-data.git", "resolves to 169.254.169.254, a link-local address"),
        ("https://127.0.0.1:8443/platform.git", "resolves to 127.0.0.1, a loopback address"),
        ("https://localhost/platform.git", "a loopback address"),  # a name: resolved, every address checked
        ("http://[::1]/platform.git", "a loopback address"),
        ("https://10.0.0.5/platform.git", "a private address"),
        ("https://[::ffff:192.168.1.1]/platform.git", "a private address"),
    ],
)
def test_the_api_refuses_a_source_on_an_internal_address(register, url, says, settings):
    settings.GITOPS_ALLOWED_NETWORKS = []

    answer = register(url=url)

    assert answer.status_code == 400, answer.text
    assert says in answer.json()["errors"]["url"][0]
    assert "GPUCLOUD_GITOPS_ALLOWED_NETWORKS" in answer.json()["errors"]["url"][0]
    assert not GitSource.objects.exists()


def test_the_api_refuses_credentials_over_plain_http(register):
    answer = register(url="http://93.184.215.14/platform.git", username="deploy", password="s3cret")

    assert answer.status_code == 400, answer.text
    assert "credentials are never sent over plain http://" in answer.json()["errors"]["url"][0]
    assert not GitSource.objects.exists()


def test_a_change_that_would_send_the_stored_password_over_http_is_refused(db, settings):
    source = services.create_source(
        actor=CONSOLE, name="platform", url="https://93.184.215.14/p.git", password="s3cret"
    )

    with pytest.raises(ValidationFailed, match="never sent over plain http"):
        services.update_source(actor=CONSOLE, source=source, url="http://93.184.215.14/p.git")

    assert GitSource.objects.get().url == "https://93.184.215.14/p.git"


def test_an_operator_may_allow_an_internal_network(served, settings):
    settings.GITOPS_ALLOWED_NETWORKS = [ip_network("127.0.0.0/8")]
    with smart_http(served) as server:
        source = services.create_source(
            actor=CONSOLE, name="internal", url=f"{server.url}/platform.git", path="tenants"
        )
        synced = services.sync(source)

    assert synced.state == "synced", synced.error
    assert h200_quota("vision") == 8


def test_a_stored_source_on_an_internal_address_is_refused_at_sync_and_never_reached(served, settings):
    settings.GITOPS_ALLOWED_NETWORKS = []
    with smart_http(served) as server:
        # stored before the rule (or the allow-list changed since): the fetch checks again
        source = GitSource.objects.create(name="internal", url=f"{server.url}/platform.git", path="tenants")
        synced = services.sync(source)

    assert synced.state == "failed"
    assert "not fetched: the git source host '127.0.0.1' resolves to 127.0.0.1, a loopback" in synced.error
    assert server.requests == []


def test_a_stored_password_is_never_sent_over_plain_http(served, settings):
    settings.GITOPS_ALLOWED_NETWORKS = [ip_network("127.0.0.0/8")]
    with smart_http(served, "deploy:s3cret") as server:
        source = GitSource.objects.create(
            name="plain",
            url=f"{server.url}/platform.git",
            path="tenants",
            username="deploy",
            password_ciphertext=crypto.encrypt("s3cret"),
        )
        synced = services.sync(source)

    assert synced.state == "failed"
    assert "credentials are never sent over plain http://" in synced.error
    assert server.requests == []


def test_git_connects_to_the_checked_address_not_to_a_second_lookup(served, settings, monkeypatch):
    """Only gpucloud's own check can resolve `git.pinned.test`; git itself cannot. The fetch works only if
    git connects to the address that was checked (http.curloptResolve), as a rebinding name must not
    change."""
    settings.GITOPS_ALLOWED_NETWORKS = [ip_network("127.0.0.0/8")]
    real = socket.getaddrinfo

    def pinned(host, port, *args, **kwargs):
        return real("127.0.0.1" if host == "git.pinned.test" else host, port, *args, **kwargs)

    with smart_http(served) as server:
        port = server.url.rsplit(":", 1)[1]
        monkeypatch.setattr(socket, "getaddrinfo", pinned)
        source = services.create_source(
            actor=CONSOLE, name="pinned", url=f"http://git.pinned.test:{port}/platform.git", path="tenants"
        )
        synced = services.sync(source)

    assert synced.state == "synced", synced.error
    assert server.requests  # it was reached, at the checked address
