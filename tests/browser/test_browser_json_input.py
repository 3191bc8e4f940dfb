"""The run form's JSON box in a real browser (static/js/json-input.js): it says where typed
JSON breaks, as it is typed, and pretty-prints valid JSON; the server checks again."""

from __future__ import annotations

import pytest

from tests.support.browser import browser_context

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

INPUTS = {"config": {"type": "json", "description": "Settings.", "optional": True}}


def test_it_checks_and_formats_json_as_it_is_typed(live_server, make_tool, developer) -> None:
    from playwright.sync_api import expect

    make_tool("configured", language="python", inputs=INPUTS)
    with browser_context(live_server, user=developer) as context:
        page = context.new_page()
        page.goto("/tools/configured/run/")
        box = page.locator("textarea[name=config]")
        status = page.locator("#run-form .json-status")

        box.fill('{"depth": 2,}')
        expect(status).to_contain_text("config: not valid JSON")
        expect(status).to_contain_text("line 1")
        expect(box).to_have_attribute("aria-invalid", "true")
        page.click("text=Format JSON")
        expect(box).to_have_value('{"depth": 2,}')  # broken JSON is left as typed

        box.fill('{"depth": 2, "tags": ["a"]}')
        expect(status).to_have_text("valid JSON")
        page.click("text=Format JSON")
        expect(box).to_have_value('{\n  "depth": 2,\n  "tags": [\n    "a"\n  ]\n}')
        expect(box).not_to_have_attribute("aria-invalid", "true")
