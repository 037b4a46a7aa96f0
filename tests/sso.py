"""A real OpenID provider for the sign-in tests: npm oidc-provider (tests/oidc/), started once per run on
loopback, and helpers that sign in through it over plain HTTP."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urljoin, urlsplit

import pytest
import requests

from tenants import sso
from tests.tools import free_port, unavailable

HERE = Path(__file__).parent / "oidc"
CLIENT_ID, CLIENT_SECRET = "gpucloud", "test-client-secret-4f7a"
CLI_CLIENT_ID = "gpucloud-cli"  # the public client `kubectl oidc-login` uses (OIDC_KUBERNETES_CLIENT_ID)
ADMIN_GROUP = "gpucloud-admins"


class Provider:
    """The running provider: its issuer URL and the people it knows (editable between sign-ins)."""

    def __init__(self, issuer: str, users_file: Path) -> None:
        self.issuer = issuer
        self.users_file = users_file

    def set_users(self, users: dict[str, dict[str, Any]]) -> None:
        self.users_file.write_text(json.dumps(users))

    def person(
        self,
        login: str,
        groups: list[str],
        password: str = "correct horse",
        *,
        email: str | None = None,
        email_verified: bool = True,
        preferred_username: str | None = None,
    ) -> None:
        users = json.loads(self.users_file.read_text())
        users[login] = {
            "password": password,
            "email": email or f"{login}@corp.example",
            "email_verified": email_verified,
            "name": login,
            "groups": groups,
            "preferred_username": preferred_username or login,
        }
        self.set_users(users)


@pytest.fixture(scope="session")
def oidc_provider(
    django_db_setup: Any, live_server: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Provider]:
    # django_db_setup first: the test database then outlives the live server's connection to it.
    if shutil.which("node") is None or not (HERE / "node_modules" / "oidc-provider").is_dir():
        unavailable("node and tests/oidc/node_modules (npm ci) are needed for the OpenID provider")
    port = free_port()
    users_file = tmp_path_factory.mktemp("oidc") / "users.json"
    provider = Provider(f"http://127.0.0.1:{port}", users_file)
    provider.set_users({})
    env = {
        **os.environ,
        "PORT": str(port),
        "CLIENT_ID": CLIENT_ID,
        "CLIENT_SECRET": CLIENT_SECRET,
        "REDIRECT_URI": f"{live_server.url}/oidc/callback/",
        "POST_LOGOUT_REDIRECT_URI": f"{live_server.url}/login/",
        "USERS_FILE": str(users_file),
        "CLI_CLIENT_ID": CLI_CLIENT_ID,
    }
    process = subprocess.Popen(
        ["node", str(HERE / "provider.mjs")], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                requests.get(
                    f"{provider.issuer}/.well-known/openid-configuration", timeout=1
                ).raise_for_status()
                break
            except requests.RequestException:
                if process.poll() is not None or time.monotonic() > deadline:
                    output = process.stdout.read().decode() if process.stdout else ""
                    pytest.fail(f"the OpenID provider did not start: {output}")
                time.sleep(0.1)
        yield provider
    finally:
        process.terminate()
        process.wait(10)


@pytest.fixture
def sso_on(settings: Any, oidc_provider: Provider, transactional_db: Any) -> Provider:
    """gpucloud configured for the test provider, as OIDC_* variables would configure it."""
    settings.OIDC_ISSUER = oidc_provider.issuer
    settings.OIDC_RP_CLIENT_ID = CLIENT_ID
    settings.OIDC_RP_CLIENT_SECRET = CLIENT_SECRET
    settings.OIDC_ADMIN_GROUPS = [ADMIN_GROUP]
    settings.AUTHENTICATION_BACKENDS = ["django.contrib.auth.backends.ModelBackend", "tenants.sso.Backend"]
    sso.forget_discovery()
    oidc_provider.set_users({})
    return oidc_provider


def follow_to_callback(browser: requests.Session, base: str, login: str, password: str) -> requests.Response:
    """Start signing in and pass the provider's login form; stop at the redirect back to gpucloud."""
    page = browser.get(f"{base}/oidc/authenticate/")
    assert page.status_code == 200, page.text
    action = re.search(r'action="([^"]+)"', page.text)
    assert action, page.text
    response = browser.post(
        urljoin(page.url, action[1]),
        data={"prompt": "login", "login": login, "password": password},
        allow_redirects=False,
    )
    while response.is_redirect and not response.headers["Location"].startswith(f"{base}/oidc/callback/"):
        response = browser.get(urljoin(response.url, response.headers["Location"]), allow_redirects=False)
    return response


def sign_in(
    base: str, login: str, password: str = "correct horse"
) -> tuple[requests.Session, requests.Response]:
    """A full authorization-code sign-in, as a browser without JavaScript does it."""
    browser = requests.Session()
    response = follow_to_callback(browser, base, login, password)
    if response.is_redirect:
        response = browser.get(response.headers["Location"])
    return browser, response


def kubelogin_id_token(provider: Provider, login: str, password: str = "correct horse") -> str:
    """An ID token for the CLI's client, got as `kubectl oidc-login get-token` gets it: the authorization
    code flow with PKCE to its loopback redirect, the login form passed, the code exchanged for tokens."""
    document = requests.get(f"{provider.issuer}/.well-known/openid-configuration", timeout=5).json()
    verifier = base64.urlsafe_b64encode(os.urandom(32)).rstrip(b"=").decode()
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    redirect = "http://localhost:8000"
    browser = requests.Session()
    page = browser.get(
        document["authorization_endpoint"],
        params={
            "client_id": CLI_CLIENT_ID,
            "response_type": "code",
            "redirect_uri": redirect,
            "scope": "openid email profile groups",
            "code_challenge": challenge,
            "code_challenge_method": "S256",
            "state": "kubelogin-state",
            "nonce": "kubelogin-nonce",
        },
    )
    action = re.search(r'action="([^"]+)"', page.text)
    assert page.status_code == 200, page.text
    assert action, page.text
    response = browser.post(
        urljoin(page.url, action[1]),
        data={"prompt": "login", "login": login, "password": password},
        allow_redirects=False,
    )
    while True:
        if response.is_redirect and not response.headers["Location"].startswith(redirect):
            response = browser.get(urljoin(response.url, response.headers["Location"]), allow_redirects=False)
        elif not response.is_redirect and 'value="consent"' in response.text:
            # The provider asks a person to confirm a native client once (they click Continue in the browser).
            consent = re.search(r'action="([^"]+)"', response.text)
            assert consent, response.text
            response = browser.post(
                urljoin(response.url, consent[1]), data={"prompt": "consent"}, allow_redirects=False
            )
        else:
            break
    assert response.is_redirect, response.text
    code = parse_qs(urlsplit(response.headers["Location"]).query)["code"][0]
    tokens = requests.post(
        document["token_endpoint"],
        data={
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": redirect,
            "client_id": CLI_CLIENT_ID,
            "code_verifier": verifier,
        },
        timeout=5,
    )
    tokens.raise_for_status()
    return str(tokens.json()["id_token"])
