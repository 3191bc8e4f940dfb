"""List inputs (`string[]`, `integer[]`, ...) in a real browser: the run form takes one item
per line in a textarea, from the keyboard alone (Enter makes a new line, never submits);
an error names the line as the person sees it (blank lines count) and gets focus back;
the run form and a preset form with list inputs pass axe, reference only ids the page
has, and fit a phone."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from tests.browser.test_browser_keyboard import tab_to
from tests.support.browser import (
    ARTIFACTS,
    axe_violations,
    browser_context,
    chromium,
    dangling_references,
)
from tests.support.page_tour import LIST_INPUTS
from tools_app.models import Run, ToolPreset

pytestmark = pytest.mark.browser

GREET_TS = """
export async function execute(toolCallId: string, params: any) {
  const total = (params.counts ?? []).reduce((a: number, b: number) => a + b, 0);
  const text = `${params.greeting} ${params.names.join(" and ")}; total ${total}`;
  return { content: [{ type: "text", text }] };
}
"""
WIDTHS = [{"width": 1280, "height": 900}, {"width": 390, "height": 844}]


@pytest.fixture(scope="module")
def browser() -> Iterator:
    with chromium() as browser:
        yield browser


@pytest.mark.worker
def test_it_fills_list_inputs_and_runs_the_tool_from_the_keyboard(
    live_server, worker, make_tool, developer, browser
):
    from playwright.sync_api import expect

    make_tool("greet", source=GREET_TS, inputs=LIST_INPUTS)
    with browser_context(
        live_server, user=developer, browser=browser, timeout_ms=30_000
    ) as context:
        page = context.new_page()
        page.goto("/tools/greet/run/")
        # The form's first field has focus on load.
        expect(page.locator("textarea[name=names]")).to_be_focused()
        page.keyboard.type("Ann")
        page.keyboard.press("Enter")  # a new line in the textarea, not a submit
        page.keyboard.type("Bob")
        expect(page).to_have_url(re.compile(r"/tools/greet/run/"))
        tab_to(page, "textarea[name=counts]")
        page.keyboard.type("1\n\nmany")  # the wrong item is on line 3
        tab_to(page, "#run-form button[type=submit]")
        page.keyboard.press("Enter")

        counts = page.locator("textarea[name=counts]")
        error = page.locator("#id_counts_error")
        expect(error).to_have_text("line 3: must be an integer, one item per line.")
        # Focus comes back on the field to fix, which names the error for screen readers.
        expect(counts).to_be_focused()
        assert "id_counts_error" in counts.get_attribute("aria-describedby").split()
        expect(page.locator("textarea[name=names]")).to_have_value("Ann\nBob")
        page.screenshot(path=str(ARTIFACTS / "list-inputs-error-1280.png"), full_page=True)

        page.keyboard.press("Control+End")
        page.keyboard.press("Shift+Home")
        page.keyboard.type("2")
        tab_to(page, "#run-form button[type=submit]")
        page.keyboard.press("Enter")

        expect(page).to_have_url(re.compile(r"/runs/[0-9a-f-]{36}/(#main)?$"))
        expect(page.locator("#run-status")).to_have_text("Succeeded", timeout=30_000)
        expect(page.locator(".result")).to_contain_text("hello Ann and Bob; total 3")
        page.screenshot(path=str(ARTIFACTS / "list-inputs-run-1280.png"), full_page=True)
    run = Run.objects.get()
    assert run.params["names"] == ["Ann", "Bob"] and run.params["counts"] == [1, 2]


def check_page(page, name: str, viewport: dict) -> list[str]:
    """axe, ARIA references and sideways scrolling of the page open in `page`."""
    page.screenshot(path=str(ARTIFACTS / f"{name}-{viewport['width']}.png"), full_page=True)
    problems = axe_violations(page) + dangling_references(page)
    width = page.evaluate("document.documentElement.scrollWidth")
    if width > viewport["width"]:
        problems.append(f"{width} px wide")
    return [f"{name} at {viewport['width']}: {problem}" for problem in problems]


@pytest.mark.django_db(transaction=True)
def test_it_shows_list_inputs_accessibly_on_the_run_and_preset_forms(
    live_server, make_tool, console_admin, browser
):
    from playwright.sync_api import expect

    make_tool("greet", source=GREET_TS, inputs=LIST_INPUTS)
    problems: list[str] = []
    for viewport in WIDTHS:
        with browser_context(
            live_server, user=console_admin, viewport=viewport, browser=browser
        ) as context:
            page = context.new_page()
            page.goto("/tools/greet/run/")
            names = page.get_by_label("names")
            expect(names).to_have_attribute("aria-describedby", "id_names_helptext")
            expect(page.locator("#id_names_helptext")).to_have_text(
                "Whom to greet. One string per line."
            )
            # The list's textarea is as wide as the text input above it (the shared look).
            text_box = page.get_by_label("greeting").bounding_box()
            assert names.bounding_box()["width"] == pytest.approx(text_box["width"], abs=1)
            expect(page.get_by_label("weights")).to_have_value("1.5\n2")
            problems += check_page(page, "list-inputs-run-form", viewport)

            page.get_by_label("names").fill("Ann")
            page.get_by_label("flags").fill("true\n\nmaybe")
            page.get_by_role("button", name="Run", exact=True).click()
            expect(page.locator("#id_flags_error")).to_have_text(
                "line 3: must be true or false, one item per line."
            )
            flags = page.get_by_label("flags")
            expect(flags).to_have_attribute("aria-invalid", "true")
            expect(flags).to_have_css("border-color", "rgb(179, 38, 30)")
            problems += check_page(page, "list-inputs-run-form-errors", viewport)

            page.goto("/tools/greet/presets/")
            value = page.get_by_label("Value")
            expect(page.locator("#id_value_helptext")).to_contain_text("one item per line")
            problems += check_page(page, "list-inputs-presets", viewport)
            page.get_by_label("Input").select_option("team")
            page.get_by_role("button", name="Save preset").click()  # no value
            expect(page.locator("#id_value_error")).to_have_text("This field is required.")
            problems += check_page(page, "list-inputs-presets-errors", viewport)
            # One item per line, as on the run form.
            value.fill("Ann\n\nBob\n")
            page.get_by_role("button", name="Save preset").click()
            expect(page.get_by_role("row", name=re.compile("team"))).to_contain_text("Ann")
            preset = ToolPreset.objects.get(input="team")
            assert preset.value == ["Ann", "Bob"]
            preset.delete()
    assert problems == []
