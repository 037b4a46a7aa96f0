"""A headless Chromium (Debian's, driven by PyPI playwright) for the portal's browser tests.

`browser` signs people in, takes screenshots, and fails the test if the page asked for anything outside
the live server or logged a console error. Screenshots go to GPUCLOUD_SCREENSHOTS (`make screenshots` sets
docs/screenshots), else to var/screenshots.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.db import connections

from tests.tools import CHROMIUM, CHROMIUM_ARGS, unavailable

WIDE: Any = {"width": 1280, "height": 860}
NARROW: Any = {"width": 390, "height": 844}


@dataclass
class Browser:
    """One person's browser on the live server: what it asked for and what it complained about."""

    url: str
    context: Any
    page: Any
    shots: Path
    requests: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def watch(self, page: Any) -> Any:
        page.on("request", lambda r: self.requests.append(r.url))
        page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: self.errors.append(str(e)))
        return page

    def go(self, path: str) -> Any:
        response = self.page.goto(self.url + path)
        self.page.wait_for_load_state("load")
        return response

    def sign_in(self, username: str, password: str | None = None) -> None:
        self.go("/login/")
        self.page.fill("input[name=username]", username)
        self.page.fill("input[name=password]", password or f"pw-{username}")
        self.page.click("button[type=submit]")
        self.page.wait_for_url(self.url + "/")

    def shot(self, name: str, *, narrow: bool = False) -> Path:
        """Save the whole page as NAME.png (at 390 px wide too when `narrow`)."""
        self.shots.mkdir(parents=True, exist_ok=True)
        path = self.shots / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        if narrow:
            self.page.set_viewport_size(NARROW)
            self.page.screenshot(path=str(self.shots / f"{name}-390px.png"), full_page=True)
            self.page.set_viewport_size(WIDE)
        return path

    def outside(self) -> list[str]:
        return [u for u in self.requests if not (u.startswith(self.url) or u.startswith("data:"))]


@pytest.fixture
def browser(live_server: Any) -> Iterator[Browser]:
    if not CHROMIUM.exists():
        unavailable("chromium is needed at /usr/bin/chromium for the browser tests")

    from playwright.sync_api import sync_playwright

    # Playwright's sync API runs an event loop in this thread; Django's async-safety check must allow the
    # database calls the test makes around it.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    shots = Path(os.environ.get("GPUCLOUD_SCREENSHOTS") or settings.VAR_DIR / "screenshots")
    try:
        with sync_playwright() as p:
            chromium = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            context = chromium.new_context(viewport=WIDE, accept_downloads=True, timezone_id="Europe/Paris")
            context.set_default_timeout(15_000)
            browser = Browser(live_server.url, context, None, shots)
            browser.page = browser.watch(context.new_page())
            yield browser
            # Inside Playwright's event loop Django opens the test's queries on a connection of their own
            # (asgiref keys connections by context); close it, or the test database cannot be dropped.
            connections.close_all()
            context.close()
            chromium.close()
    finally:
        del os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"]
    assert not browser.outside(), f"the browser asked outside the live server: {browser.outside()}"
    assert not browser.errors, "console errors:\n" + "\n".join(browser.errors)
