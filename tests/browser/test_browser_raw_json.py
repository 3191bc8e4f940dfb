"""The run form's raw JSON mode in a real browser (static/src/params-editor.js): a
CodeMirror JSON editor checked against the tool's input schema as it is typed, with each
problem marked where it is and a status line for screen readers, that posts its textarea
like the plain form (which still works without JavaScript); the server checks again."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from tests.support import REPO, require
from tests.support.browser import ARTIFACTS, axe_violations, browser_context, chromium
from tools_app.models import Run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

BUILD = REPO / "static" / "build" / "params-editor.js"
INPUTS = {
    "query": {"type": "string", "description": "What to look for."},
    "limit": {"type": "integer", "description": "At most this many.", "optional": True,
              "default": 10},
    "mode": {"type": "enum", "values": "fast,thorough", "description": "How hard to try.",
             "optional": True, "default": "fast"},
}  # fmt: skip
WIDTHS = {"1280": {"width": 1280, "height": 1000}, "390": {"width": 390, "height": 844}}


@pytest.fixture(scope="module")
def browser() -> Iterator:
    require(not BUILD.exists(), f"{BUILD} is not built (npm ci && npm run build)")
    with chromium() as browser:
        yield browser


def open_editor(page):
    page.goto("/tools/search/run/")
    page.locator("#raw-json summary").click()
    editor = page.locator("#raw-json .cm-content")
    editor.wait_for()
    return editor


def replace(page, editor, text: str) -> None:
    """Select everything in the editor and type `text` over it (as a paste: no
    auto-indent of the lines)."""
    editor.click()
    page.keyboard.press("Control+A")
    page.keyboard.insert_text(text)


@pytest.mark.parametrize("width", WIDTHS)
def test_it_checks_raw_json_against_the_inputs_as_it_is_typed(
    live_server, make_tool, developer, browser, width
) -> None:
    from playwright.sync_api import expect

    make_tool("search", language="python", inputs=INPUTS)
    with browser_context(
        live_server, user=developer, browser=browser, viewport=WIDTHS[width]
    ) as context:
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        editor = open_editor(page)
        textarea = page.locator("textarea[name=params]")
        status = page.locator("#raw-json .json-status")
        marked = page.locator("#raw-json .cm-lintRange-error")
        expect(textarea).to_be_hidden()  # the editor stands in for it, in the form
        expect(status).to_have_attribute("role", "status")
        expect(editor).to_have_attribute("aria-describedby", re.compile(r"\bid_params_status\b"))

        # A trailing comma on line 4: the parse error says where.
        replace(page, editor, '{\n  "query": "cats",\n  "limit": 3,\n}')
        expect(status).to_contain_text("1 problem: line 4: Not valid JSON")
        expect(status).to_contain_text("(line 4, column 1)")
        expect(editor).to_have_attribute("aria-invalid", "true")
        expect(page.locator("#raw-json .cm-lint-marker-error")).to_have_count(1)
        expect(textarea).to_have_value('{\n  "query": "cats",\n  "limit": 3,\n}')
        # Where Chromium's message names no position, the syntax tree's first error does.
        replace(page, editor, '{"query": "cats",\n "limit": tru}')
        expect(status).to_contain_text(re.compile(r"line 2: Not valid JSON: .*\(line 2, column"))

        # Schema problems: each marked on what is wrong (the name, the value).
        replace(page, editor, '{\n  "limit": "ten",\n  "colour": 1,\n  "mode": "slow"\n}')
        expect(status).to_contain_text("4 problems: line 1: query: is required; line 2:")
        expect(status).to_contain_text("line 2: limit: must be an integer, got a string")
        expect(status).to_contain_text(
            "line 3: colour: unknown parameter (allowed: query, limit, mode)"
        )
        expect(status).to_contain_text("line 4: mode: 'slow' is not one of fast, thorough")
        expect(status).to_contain_text("line 1: query: is required")
        expect(marked).to_have_text(["{", '"ten"', '"colour"', '"slow"'])
        assert axe_violations(page) == []
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        page.screenshot(path=str(ARTIFACTS / f"run-raw-json-errors-{width}.png"), full_page=True)

        # Fixed: every mark goes, the status says so.
        fixed = '{\n  "query": "cats",\n  "limit": 3,\n  "mode": "thorough"\n}'
        replace(page, editor, fixed)
        expect(status).to_have_text("Valid JSON: it matches the tool's inputs.")
        expect(marked).to_have_count(0)
        expect(editor).not_to_have_attribute("aria-invalid", "true")
        expect(textarea).to_have_value(fixed)
        page.screenshot(path=str(ARTIFACTS / f"run-raw-json-valid-{width}.png"), full_page=True)

        page.get_by_role("button", name="Run with this JSON").click()
        expect(page).to_have_url(re.compile(r"/runs/[0-9a-f-]{36}/$"))
        assert errors == []
    assert Run.objects.get().params == {"query": "cats", "limit": 3, "mode": "thorough"}


def test_it_leaves_the_editor_with_tab_and_runs_from_the_keyboard(
    live_server, make_tool, developer, browser
) -> None:
    from playwright.sync_api import expect

    make_tool("search", language="python", inputs=INPUTS)
    with browser_context(live_server, user=developer, browser=browser) as context:
        page = context.new_page()
        page.goto("/tools/search/run/")
        summary = page.locator("#raw-json summary")
        summary.focus()
        page.keyboard.press("Enter")  # opens the panel
        editor = page.locator("#raw-json .cm-content")
        page.keyboard.press("Tab")
        expect(editor).to_be_focused()
        page.keyboard.press("Control+A")
        page.keyboard.type('{"query": "keys"}')
        page.keyboard.press("Tab")  # out of the editor, never a tab typed into it
        button = page.get_by_role("button", name="Run with this JSON")
        expect(button).to_be_focused()
        expect(page.locator("textarea[name=params]")).to_have_value('{"query": "keys"}')
        page.keyboard.press("Shift+Tab")
        expect(editor).to_be_focused()
        page.keyboard.press("Tab")
        page.keyboard.press("Enter")
        expect(page).to_have_url(re.compile(r"/runs/[0-9a-f-]{36}/$"))
    assert Run.objects.get().params == {"query": "keys", "limit": 10, "mode": "fast"}


def test_it_puts_focus_in_the_editor_when_the_server_refuses_the_json(
    live_server, make_tool, developer, browser
) -> None:
    """The server stays the guard: what the editor flags still posts, comes back with
    the server's problems, and focus lands in the editor to fix them."""
    from playwright.sync_api import expect

    make_tool("search", language="python", inputs=INPUTS)
    with browser_context(live_server, user=developer, browser=browser) as context:
        page = context.new_page()
        editor = open_editor(page)
        replace(page, editor, '{"query": "cats", "colour": 1}')
        page.get_by_role("button", name="Run with this JSON").click()
        expect(page.locator("#raw-json p.error[role=alert]")).to_contain_text(
            "colour: unknown parameter"
        )
        expect(page.locator("#raw-json .cm-content")).to_be_focused()
        expect(page.locator("#raw-json .cm-lintRange-error")).to_have_text(['"colour"'])
        expect(page.locator("#raw-json .cm-content")).to_have_attribute(
            "aria-describedby", "id_params_helptext id_params_error id_params_status"
        )
    assert not Run.objects.exists()


def test_it_posts_the_plain_textarea_without_javascript(
    live_server, make_tool, developer, browser
) -> None:
    from playwright.sync_api import expect

    make_tool("search", language="python", inputs=INPUTS)
    with browser_context(
        live_server, user=developer, browser=browser, java_script_enabled=False
    ) as context:
        page = context.new_page()
        page.goto("/tools/search/run/")
        page.locator("#raw-json summary").click()
        expect(page.locator("#raw-json .cm-editor")).to_have_count(0)
        page.fill("textarea[name=params]", '{"query": "plain"}')
        page.get_by_role("button", name="Run with this JSON").click()
        expect(page).to_have_url(re.compile(r"/runs/[0-9a-f-]{36}/$"))
    assert Run.objects.get().params == {"query": "plain", "limit": 10, "mode": "fast"}
