"""The embedded default serves its static files: the portal is styled and the API docs render, in Chromium.

A real `serve_embedded` (DEBUG off, as `make run` runs it), PyPI playwright driving Debian's Chromium. The
pages keep the strict Content Security Policy; the screenshots land in /tmp/embed-*.png for a person to see.
"""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from tests.embedded import Embedded, embedded_default
from tests.tools import CHROMIUM, CHROMIUM_ARGS, unavailable

pytestmark = pytest.mark.worker


@pytest.fixture
def running(tmp_path) -> Iterator[Embedded]:
    with embedded_default(tmp_path / "var") as embedded:
        yield embedded


@pytest.fixture
def page() -> Iterator[Any]:
    if not CHROMIUM.exists():
        unavailable("chromium is needed at /usr/bin/chromium for the browser test")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield browser.new_page()
        browser.close()


def watch_console(page: Any) -> list[str]:
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("response", lambda r: errors.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    return errors


def test_the_sign_in_page_is_styled_by_the_portal_stylesheet(running, page):
    errors = watch_console(page)
    with urllib.request.urlopen(f"{running.base}/static/portal/app.css") as css:
        assert css.status == 200
        assert css.headers["Content-Type"].startswith("text/css")

    answer = page.goto(f"{running.base}/login/")
    page.screenshot(path="/tmp/embed-sign-in.png", full_page=True)

    assert "script-src 'self'" in answer.headers["content-security-policy"]
    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
    button = page.evaluate("getComputedStyle(document.querySelector('button')).backgroundColor")
    assert (background, button) == ("rgb(248, 249, 251)", "rgb(59, 91, 219)")  # app.css, not the defaults
    assert errors == []


def test_the_api_docs_render_swagger_ui_with_its_operations(running, page):
    errors = watch_console(page)
    requested: list[str] = []
    page.on("request", lambda r: requested.append(r.url))

    answer = page.goto(f"{running.base}/api/docs/")
    page.wait_for_selector(".swagger-ui .opblock-tag-section .opblock", timeout=20_000)
    page.screenshot(path="/tmp/embed-api-docs.png", full_page=False)

    policy = answer.headers["content-security-policy"]
    assert "script-src 'self'" in policy
    assert "'unsafe-eval'" not in policy
    assert page.locator(".swagger-ui .opblock").count() > 20  # every operation of the API is listed
    assert "/api/v1/tenants/" in page.content()
    assert all(url.startswith(running.base) for url in requested), requested  # nothing from a CDN
    assert errors == []
