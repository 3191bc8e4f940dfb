"""Debian's Chromium driven by Playwright, shared by the browser tests.

`playwright install` cannot download browsers here, so every test launches
/usr/bin/chromium. Without it a test skips, except in CI, where it fails."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings
from django.db import connections
from django.test import Client

from tests.support import REPO, require

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
# axe-core from npm, copied here by `npm run build` (dev.py build_assets).
AXE = REPO / "tests" / "build" / "axe.min.js"
AXE_BLOCKING = ("serious", "critical")
# Chromium reports a blocked script, handler, style or load on the console ("... violates
# the following Content Security Policy directive ..."); the listener below reports the
# securitypolicyviolation event as well, in case a message's wording changes.
CSP_MARKS = ("Content Security Policy", "CSP violation")
REPORT_CSP_VIOLATIONS = """
document.addEventListener("securitypolicyviolation", (event) => {
  console.error(`CSP violation: ${event.violatedDirective} blocked ${event.blockedURI}`);
});
"""


@contextmanager
def chromium() -> Iterator:
    """Chromium launched through Playwright; a test module may share one across its tests
    (browser_context(..., browser=it)) instead of starting one per test."""
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
            try:
                yield browser
            finally:
                browser.close()
                # While Playwright's loop counts as running, Django keeps this thread's
                # connections in a context variable instead of the thread's own storage;
                # close those here, or they stay open (and block dropping the test
                # database) once the loop is gone and Django looks elsewhere.
                connections.close_all()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@contextmanager
def browser_context(
    live_server,
    *,
    user=None,
    viewport: dict | None = None,
    timeout_ms: int = 20_000,
    browser=None,
    **options,
) -> Iterator:
    """A Playwright browser context on `live_server`, logged in as `user` if given, in
    `browser` (from chromium()) or in a Chromium of its own. `options` go to Playwright's
    new_context (java_script_enabled=False, ...).

    Every page it opens is watched for Content-Security-Policy violations: a test that
    ends normally fails if any occurred (context.csp_violations lists them meanwhile)."""
    if browser is None:
        with (
            chromium() as own,
            browser_context(
                live_server,
                user=user,
                viewport=viewport,
                timeout_ms=timeout_ms,
                browser=own,
                **options,
            ) as context,
        ):
            yield context
        return
    context = browser.new_context(
        base_url=live_server.url, viewport=viewport or {"width": 1280, "height": 1000}, **options
    )
    context.set_default_timeout(timeout_ms)
    violations: list[str] = []
    context.csp_violations = violations  # type: ignore[attr-defined]
    context.add_init_script(REPORT_CSP_VIOLATIONS)

    def note_violation(message) -> None:
        if any(mark in message.text for mark in CSP_MARKS):
            violations.append(f"{message.page and message.page.url}: {message.text}")

    context.on("console", note_violation)
    if user is not None:
        client = Client()
        client.force_login(user)
        session = client.cookies[settings.SESSION_COOKIE_NAME].value
        context.add_cookies(
            [{"name": settings.SESSION_COOKIE_NAME, "value": session, "url": live_server.url}]
        )
    try:
        yield context
        assert violations == [], f"Content-Security-Policy violations: {violations}"
    finally:
        context.close()


def axe_violations(page) -> list[str]:
    """axe's serious and critical violations on the page, one line each."""
    require(not AXE.exists(), f"{AXE} is missing: run `npm run build` (dev.py does)")
    # Evaluated through the DevTools protocol, which the page's Content-Security-Policy
    # does not govern, so no test-only script is ever served by the console.
    if not page.evaluate("typeof window.axe !== 'undefined'"):
        page.evaluate(AXE.read_text())
    results = page.evaluate("async () => await axe.run(document, {resultTypes: ['violations']})")
    return [
        f"{violation['id']} ({violation['impact']}): {violation['help']} at "
        + ", ".join(" ".join(node["target"]) for node in violation["nodes"][:3])
        + f" ({violation['nodes'][0]['failureSummary']})"
        for violation in results["violations"]
        if violation["impact"] in AXE_BLOCKING
    ]


# An ARIA attribute naming an id the page lacks describes or labels nothing: axe passes
# aria-describedby="help missing" when one id exists, so the tests look for themselves.
DANGLING_REFERENCES = """
() => [...document.querySelectorAll("[aria-describedby], [aria-labelledby], [aria-controls]")]
  .flatMap((el) => ["aria-describedby", "aria-labelledby", "aria-controls"]
    .flatMap((attr) => (el.getAttribute(attr) || "").split(/\\s+/).filter(Boolean)
      .filter((id) => !document.getElementById(id))
      .map((id) => `${el.tagName.toLowerCase()}[name=${el.getAttribute("name")}] ${attr}: #${id}`)))
"""


def dangling_references(page) -> list[str]:
    """aria-describedby/-labelledby/-controls ids that no element of the page has."""
    return page.evaluate(DANGLING_REFERENCES)
