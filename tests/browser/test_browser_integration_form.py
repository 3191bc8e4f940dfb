"""The integration form in a browser: what it said about a field or a test goes once the
form changes, and a test's answer comes into view."""

from __future__ import annotations

import pytest

from tests.support.browser import browser_context
from tests.support.integrations import create as create_integration

pytestmark = pytest.mark.browser


def test_stale_problems_go_when_the_form_changes(live_server, console_admin, transactional_db):
    from playwright.sync_api import expect

    create_integration("search", "searxng", values={"url": "http://127.0.0.1:9/"})
    with browser_context(
        live_server, user=console_admin, viewport={"width": 1280, "height": 500}
    ) as context:
        page = context.new_page()
        page.goto("/integrations/search/edit/")
        url = page.get_by_label("Base URL")

        # A test's answer comes into view, and goes once the form changes.
        page.get_by_role("button", name="Test connection").click()
        answer = page.locator("#test-result :first-child")
        expect(answer).to_be_visible()
        expect(answer).to_be_in_viewport()
        url.fill("http://127.0.0.1:10/")
        expect(page.locator("#test-result *")).to_have_count(0)

        # A field's error from a save goes once the field is changed.
        url.fill("")
        page.get_by_role("button", name="Save").click()
        error = page.locator("[id$='_error']", has_text="required")
        expect(error).to_be_visible()
        page.get_by_label("Base URL").fill("http://127.0.0.1:11/")
        expect(error).to_be_hidden()
