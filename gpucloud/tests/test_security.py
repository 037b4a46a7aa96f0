"""Hardening: deploy checks with production settings, the Content Security Policy, sign-in rate limits."""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

from cryptography.fernet import Fernet
from django.conf import settings

from core.models import AuditEvent

PRODUCTION = {
    "DEBUG": "false",
    "DATABASE_URL": "postgres://gpucloud@db.example.com:5432/gpucloud",
    "ALLOWED_HOSTS": "gpucloud.example.com",
    "OIDC_ISSUER": "https://sso.example.com/realms/corp",
    "OIDC_CLIENT_ID": "gpucloud",
}


def production_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUCLOUD_", "OIDC_", "DJANGO_"))}
    (tmp_path / "client-secret").write_text("oidc-client-secret-from-a-file\n")
    return {
        **env,
        **PRODUCTION,
        "SECRET_KEY": secrets.token_urlsafe(60),
        "GPUCLOUD_ENCRYPTION_KEYS": Fernet.generate_key().decode(),
        "OIDC_CLIENT_SECRET_FILE": str(tmp_path / "client-secret"),
        "GPUCLOUD_VAR_DIR": str(tmp_path / "var"),
    }


def test_the_deploy_checks_pass_with_production_settings(tmp_path):
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=settings.BASE_DIR,
        env=production_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_production_settings_use_secure_cookies_hsts_and_the_secret_file(tmp_path):
    code = (
        "from django.conf import settings as s; "
        "print(s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, s.SECURE_HSTS_SECONDS, s.SECURE_SSL_REDIRECT, "
        "s.OIDC_RP_CLIENT_SECRET)"
    )
    result = subprocess.run(
        [sys.executable, "-c", f"import django; django.setup(); {code}"],
        cwd=settings.BASE_DIR,
        env={**production_env(tmp_path), "DJANGO_SETTINGS_MODULE": "gpucloud.settings"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.stdout.split() == ["True", "True", "31536000", "True", "oidc-client-secret-from-a-file"]


def test_pages_carry_a_content_security_policy_without_inline_script(client, admin):
    client.force_login(admin)
    for url in ("/", "/login/", "/api/docs/"):
        response = client.get(url)
        policy = response["Content-Security-Policy"]
        script_src = re.search(r"script-src ([^;]*)", policy)[1]
        assert script_src == "'self'", url
        assert ("unsafe-inline" in policy) == (url == "/api/docs/"), url  # Swagger UI's inline styles only
        assert "frame-ancestors 'none'" in policy
        inline = re.findall(rb"<script(?![^>]*\bsrc=)[^>]*>", response.content)
        assert not inline, f"{url} has an inline script: {inline}"


def test_no_template_has_an_inline_script_or_style():
    for template in (settings.BASE_DIR / "portal" / "templates").rglob("*.html"):
        text = template.read_text()
        assert not re.search(r"<script(?![^>]*\bsrc=)", text), template
        assert "<style" not in text, template
        assert " style=" not in text, template
        assert " onclick=" not in text, template


def test_the_api_docs_load_nothing_from_the_internet(client, admin):
    client.force_login(admin)
    page = client.get("/api/docs/").content.decode()

    sources = re.findall(r'(?:src|href)="([^"]+)"', page)
    assert sources
    assert all(s.startswith("/") for s in sources), sources
    assert "swagger-ui" in page
    assert "cdn" not in page.lower()
    script = client.get("/api/docs/?script=")
    assert script.status_code == 200
    assert b"SwaggerUIBundle" in script.content


def test_sign_in_is_rate_limited_per_address(client, make_user, settings):
    make_user("alice")
    settings.LOGIN_ATTEMPTS = 3
    answers = [
        client.post("/login/", {"username": "alice", "password": "wrong"}).status_code for _ in range(4)
    ]
    assert answers == [200, 200, 200, 429]
    assert client.post("/login/", {"username": "alice", "password": "pw-alice"}).status_code == 429


def test_a_correct_password_signs_in_and_is_audited(client, make_user):
    make_user("alice")
    response = client.post("/login/", {"username": "alice", "password": "pw-alice"})
    assert response.status_code == 302
    assert response["Location"] == "/"
    assert AuditEvent.objects.get(action="user.sign_in").after == {"method": "password"}
