"""Signing in through the real OpenID provider in headless Chromium (PyPI playwright, the system browser)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connections

from tenants.models import Membership
from tests.tools import CHROMIUM, CHROMIUM_ARGS, unavailable


@pytest.fixture
def page() -> Iterator[Any]:
    if not CHROMIUM.exists():
        unavailable("chromium is needed at /usr/bin/chromium for the browser test")

    from playwright.sync_api import sync_playwright

    # Playwright's sync API runs an event loop in this thread; Django's async-safety check must allow the
    # database calls the test makes around it.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            context = browser.new_context()
            yield context.new_page()
            # Inside Playwright's event loop Django opens the test's queries on a connection of their own
            # (asgiref keys connections by context); close it, or the test database cannot be dropped.
            connections.close_all()
            context.close()
            browser.close()
    finally:
        del os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"]


def test_a_person_signs_in_with_the_company_account_in_a_browser(sso_on, live_server, make_tenant, page):
    make_tenant("vision")
    sso_on.person("grace", ["gpucloud:vision:admin"])
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)

    page.goto(f"{live_server.url}/tenants/vision/")
    page.click("#sso")
    page.fill("input[name=login]", "grace")
    page.fill("input[name=password]", "correct horse")
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/tenants/vision/")

    assert page.locator("h1").inner_text().startswith("vision")
    page.goto(f"{live_server.url}/tenants/vision/members/")
    assert page.locator("tr", has_text="grace").locator("select[name=role]").input_value() == "admin"
    assert Membership.objects.get(user__username="grace").source == "sso"

    requested: list[str] = []
    page.on("request", lambda r: requested.append(r.url))
    page.goto(f"{live_server.url}/api/docs/")  # Swagger UI from the sidecar, under the same policy
    page.wait_for_selector(".swagger-ui .info")
    assert requested
    assert all(url.startswith(live_server.url) for url in requested), requested
    assert not [e for e in errors if "Content Security Policy" in e], "\n".join(errors)
