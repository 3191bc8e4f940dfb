"""The console's everyday pages in Chromium: a new agent token shown once, monospace,
with a working copy button, gone on reload; the confirm page before publishing.
Screenshots at 1280 and 390 px go to test-artifacts/."""

from __future__ import annotations

import pytest

from tests.support import tool_files
from tests.support.browser import ARTIFACTS, browser_context
from tools_app.audit import Actor
from tools_app.catalog.versions import save_version
from tools_app.models import AgentToken, Tool

pytestmark = pytest.mark.browser

WIDTHS = (1280, 390)


@pytest.mark.parametrize("width", WIDTHS)
def test_it_shows_a_new_token_once_with_a_copy_button(
    live_server, console_admin, transactional_db, width
):
    from playwright.sync_api import expect

    viewport = {"width": width, "height": 900}
    with browser_context(live_server, user=console_admin, viewport=viewport) as context:
        page = context.new_page()
        page.goto("/tokens/new/")
        page.screenshot(path=str(ARTIFACTS / f"token-form-{width}.png"), full_page=True)
        page.fill("input[name=name]", "builder")
        page.locator("input[name=scopes]").first.check()
        page.get_by_role("button", name="Create token").click()

        box = page.locator("#raw-token")
        raw = box.input_value()
        assert raw and AgentToken.objects.count() == 1
        font = box.evaluate("element => getComputedStyle(element).fontFamily")
        assert "mono" in font.lower() or "consolas" in font.lower(), font
        page.get_by_role("button", name="Copy").click()
        expect(page.locator(".copy-status")).to_have_text("Copied.")
        page.screenshot(path=str(ARTIFACTS / f"token-created-{width}.png"), full_page=True)

        page.reload()
        assert raw not in page.content()
        expect(page.get_by_role("button", name="Create token")).to_be_visible()
        assert AgentToken.objects.count() == 1


@pytest.mark.parametrize("width", WIDTHS)
def test_it_asks_before_publishing(live_server, console_admin, transactional_db, width):
    from playwright.sync_api import expect

    save_version("alpha", tool_files("alpha"), actor=Actor.system(), publish=True)
    save_version("alpha", tool_files("alpha", description="Two."), actor=Actor.system())
    viewport = {"width": width, "height": 900}
    with browser_context(live_server, user=console_admin, viewport=viewport) as context:
        page = context.new_page()
        page.goto("/tools/alpha/")
        page.screenshot(path=str(ARTIFACTS / f"tool-actions-{width}.png"), full_page=True)
        page.get_by_role("link", name="Publish v2").click()
        expect(page.locator("h1")).to_have_text("Publish version 2 of alpha?")
        page.screenshot(path=str(ARTIFACTS / f"confirm-publish-{width}.png"), full_page=True)
        page.get_by_role("link", name="Cancel").click()
        assert page.url.endswith("/tools/alpha/")
        assert Tool.objects.get(name="alpha").published_version.number == 1
        page.get_by_role("link", name="Publish v2").click()
        page.get_by_role("button", name="Publish").click()
        expect(page.locator(".messages")).to_contain_text("Published version 2.")
        assert Tool.objects.get(name="alpha").published_version.number == 2


@pytest.mark.parametrize("width", WIDTHS)
def test_integrations_and_tokens_share_the_console_look(
    live_server, console_admin, transactional_db, width
):
    """The integrations and token pages used the browser's own look: 200 px inputs, grey
    buttons. Now their inputs fill the form and their buttons are the console's."""
    from tests.support.integrations import create

    create("search", "searxng", values={"url": "https://s.example.org"})
    viewport = {"width": width, "height": 900}
    with browser_context(live_server, user=console_admin, viewport=viewport) as context:
        page = context.new_page()
        for name, url in [
            ("integration-form", "/integrations/search/edit/"),
            ("integration", "/integrations/search/"),
            ("tokens", "/tokens/"),
            ("token-form", "/tokens/new/"),
        ]:
            page.goto(url)
            page.screenshot(path=str(ARTIFACTS / f"{name}-{width}.png"), full_page=True)
        page.goto("/integrations/search/edit/")
        field = page.locator("#integration-form input[type=text]").first
        assert field.bounding_box()["width"] > min(300, width - 100)
        button = page.locator("#integration-form button[type=submit]").first
        background = button.evaluate("element => getComputedStyle(element).backgroundColor")
        assert background not in ("rgb(239, 239, 239)", "rgb(240, 240, 240)"), background
