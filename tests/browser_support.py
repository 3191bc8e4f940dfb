"""Debian's Chromium driven by Playwright, shared by the browser tests.

`playwright install` cannot download browsers here, so every test launches
/usr/bin/chromium. Without it a test skips, except in CI, where it fails."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings
from django.test import Client

from tests.conftest import in_ci, require  # noqa: F401  (re-exported)

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ARTIFACTS = REPO / "test-artifacts"


@contextmanager
def browser_context(
    live_server, *, user=None, viewport: dict | None = None, timeout_ms: int = 20_000
) -> Iterator:
    """A Playwright browser context on `live_server`, logged in as `user` if given."""
    require(not Path(CHROMIUM).exists(), f"{CHROMIUM} is missing (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    # Playwright's sync API runs an event loop in this thread; the ORM calls of fixtures
    # and assertions are still plain synchronous code.
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            context = browser.new_context(
                base_url=live_server.url, viewport=viewport or {"width": 1280, "height": 1000}
            )
            context.set_default_timeout(timeout_ms)
            if user is not None:
                client = Client()
                client.force_login(user)
                session = client.cookies[settings.SESSION_COOKIE_NAME].value
                context.add_cookies(
                    [
                        {
                            "name": settings.SESSION_COOKIE_NAME,
                            "value": session,
                            "url": live_server.url,
                        }
                    ]
                )
            try:
                yield context
            finally:
                context.close()
                browser.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous
