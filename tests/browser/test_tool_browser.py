"""The tool pages in a real browser: htmx search and paging, and the copy button."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.browser import browser_context
from tests.views.test_tool_list import bulk_tools

pytestmark = pytest.mark.browser


@pytest.fixture
def page(live_server, viewer) -> Iterator:
    with browser_context(live_server, user=viewer) as context:
        yield context.new_page()


def test_search_and_paging_swap_the_results_and_update_the_address(page, transactional_db):
    bulk_tools(30, prefix="bulk")
    bulk_tools(3, prefix="other", language="bash")

    page.goto("/tools/")
    assert page.locator("table.tools tbody tr").count() == 25

    page.fill("#id_q", "other")
    page.wait_for_url("**/tools/?q=other*")
    page.locator("table.tools tbody tr").first.wait_for()
    assert page.locator("table.tools tbody tr").count() == 3
    assert page.locator("#tool-results").count() == 1  # swapped, not nested

    page.fill("#id_q", "")
    page.select_option("#id_language", "python")
    page.wait_for_url("**language=python*")
    page.get_by_role("link", name="Next").click()
    page.wait_for_url("**page=2*")
    assert page.locator("table.tools tbody tr").count() == 5
    assert page.locator("#id_language").input_value() == "python"

    page.go_back()
    page.wait_for_url("**language=python*")
    assert page.locator("table.tools tbody tr").count() == 25


def test_copy_button_copies_the_registry_json(page, transactional_db, make_tool):
    make_tool("alpha", inputs={"url": {"type": "string", "description": "The URL."}})
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])

    page.goto("/tools/alpha/registry/")  # the registry entry has its own tab now
    page.get_by_role("button", name="Copy JSON").click()

    page.get_by_text("Copied.").wait_for()
    copied = page.evaluate("navigator.clipboard.readText()")
    assert '"name": "alpha"' in copied
    assert copied == page.locator("#registry-json").text_content()


def test_the_filters_show_what_the_address_says_after_back_and_forward(page, transactional_db):
    """htmx restores a page from its history cache, whose HTML has the options the fields
    were rendered with: the form must follow the address, or the next Filter click
    silently changes the results."""
    from playwright.sync_api import expect

    bulk_tools(3, prefix="py", language="python")
    bulk_tools(2, prefix="sh", language="bash")
    rows = page.locator("table.tools tbody tr")

    def at(q: str, language: str):
        return lambda url: f"q={q}&" in url and f"language={language}&" in url

    page.goto("/tools/")
    page.select_option("#id_language", "python")
    page.wait_for_url(at("", "python"))
    page.fill("#id_q", "py")
    page.wait_for_url(at("py", "python"))
    page.select_option("#id_language", "bash")
    page.wait_for_url(at("py", "bash"))
    assert rows.count() == 0  # "py" tools in bash: none

    page.go_back()
    page.wait_for_url(at("py", "python"))
    expect(page.locator("#id_language")).to_have_value("python")
    expect(page.locator("#id_q")).to_have_value("py")
    assert rows.count() == 3

    page.go_back()
    page.wait_for_url(at("", "python"))
    expect(page.locator("#id_q")).to_have_value("")
    expect(page.locator("#id_language")).to_have_value("python")

    page.go_forward()
    page.wait_for_url(at("py", "python"))
    expect(page.locator("#id_q")).to_have_value("py")
    expect(page.locator("#id_language")).to_have_value("python")
    # Filtering again from the restored form keeps what the page showed.
    page.get_by_role("button", name="Filter").click()
    page.wait_for_load_state("networkidle")
    assert rows.count() == 3
