"""The console's main pages under its Content-Security-Policy, in Debian's Chromium: no
violation on any of them (tests/support/browser.py fails a test on the first one), and
what needs script still works: htmx's live run updates, the copy button, the CodeMirror
editor, Swagger UI on /api/docs."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.utils import timezone

from tests.support import REPO, require
from tests.support.browser import ARTIFACTS, browser_context
from tools_app.audit import Actor
from tools_app.models import Run, RunUpdate
from tools_app.models.runs import RunStatus, RunVia
from tools_app.runs import start

pytestmark = pytest.mark.browser

BUILD = REPO / "static" / "build" / "editor.js"
INPUTS = {"who": {"type": "string", "description": "Whom to greet."}}


@pytest.fixture
def admin_context(live_server, console_admin, transactional_db) -> Iterator:
    require(not BUILD.exists(), "static/build/editor.js is not built (npm ci && npm run build)")
    with browser_context(live_server, user=console_admin) as context:
        yield context


def visit(page, url: str) -> None:
    response = page.goto(url)
    assert response is not None and response.status == 200, url
    assert "script-src 'self'" in response.headers["content-security-policy"], url


def test_the_main_pages_run_under_the_policy(admin_context, make_tool, console_admin):
    from playwright.sync_api import expect

    make_tool("greet", inputs=INPUTS)
    page = admin_context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))

    visit(page, "/tools/")
    expect(page.locator("a[href='/tools/greet/']").first).to_be_visible()

    # The copy button's script runs (the status says what happened to the copy); the
    # registry entry is on the tool page's Registry tab.
    visit(page, "/tools/greet/")
    visit(page, "/tools/greet/registry/")
    page.click("button[data-copy]")
    expect(page.locator(".copy-status")).to_contain_text("Cop")

    # CodeMirror replaces the textareas.
    visit(page, "/tools/greet/edit/")
    expect(page.locator(".cm-editor").first).to_be_visible()

    visit(page, "/tools/greet/run/")
    expect(page.locator("input[name=who]")).to_be_visible()

    # Live updates: htmx polls the run page and appends what arrives.
    tool = admin_context_tool("greet")
    run = start.start_run(
        tool.published_version,
        {"who": "Ada"},
        actor=Actor(user=console_admin),
        via=RunVia.BROWSER,
        enqueue=False,
    )
    now = timezone.now()
    Run.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING, started_at=now, heartbeat_at=now)
    visit(page, f"/runs/{run.pk}/")
    expect(page.locator("#cancel-run")).to_be_visible()
    RunUpdate.objects.create(run=run, seq=1, content=[{"type": "text", "text": "halfway there"}])
    expect(page.locator("#run-updates li")).to_contain_text("halfway there", timeout=15_000)

    for url in ("/runs/", "/integrations/", "/integrations/new/", "/tokens/", "/tokens/new/"):
        visit(page, url)

    # Swagger UI, from django-ninja's static files, renders the API's operations.
    visit(page, "/api/docs")
    expect(page.locator(".swagger-ui .info")).to_contain_text("Tool Console agent API")
    expect(page.locator(".opblock").first).to_be_visible()
    page.screenshot(path=str(ARTIFACTS / "api-docs-csp.png"))

    assert errors == [], f"JavaScript errors: {errors}"
    assert admin_context.csp_violations == []


def admin_context_tool(name: str):
    from tools_app.models import Tool

    return Tool.objects.get(name=name)


def test_the_login_and_lockout_pages_run_under_the_policy(live_server, transactional_db):
    with browser_context(live_server) as context:
        page = context.new_page()
        visit(page, "/accounts/login/")
        for attempt in range(10):
            page.fill("input[name=username]", "nobody")
            page.fill("input[name=password]", f"wrong-{attempt}")
            page.click("#login-form button[type=submit]")
            if attempt < 9:
                page.goto("/accounts/login/")
        assert "Login locked" in page.content()
        page.screenshot(path=str(ARTIFACTS / "login-locked.png"))
        visit(page, "/admin/login/")
