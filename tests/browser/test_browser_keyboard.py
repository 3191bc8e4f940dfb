"""The console from the keyboard alone (Tab, Shift+Tab, Enter, Space, typing; never a
click): running a tool and cancelling it with a real worker, and paging a list. After
every htmx swap focus is somewhere useful, never dropped on <body>
(static/js/swap-focus.js and the data-swap-focus marks in the templates)."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from tests.browser.test_browser_runs import COUNTER_TS, INPUTS
from tests.support.browser import ARTIFACTS, browser_context, chromium
from tests.support.worker import wait_for_run
from tools_app.audit import Actor
from tools_app.models.runs import RunStatus, RunVia
from tools_app.runs import start

pytestmark = pytest.mark.browser

FOCUS_ON_BODY = "document.activeElement === document.body || document.activeElement === null"


@pytest.fixture(scope="module")
def browser() -> Iterator:
    with chromium() as browser:
        yield browser


def tab_to(page, selector: str, *, key: str = "Tab", limit: int = 40) -> None:
    """Press Tab (or Shift+Tab) until `selector` has focus, as a keyboard user would."""
    for _ in range(limit):
        page.keyboard.press(key)
        if page.evaluate("s => document.activeElement.matches(s)", selector):
            return
    raise AssertionError(f"{limit} presses of {key} never reached {selector}")


def replace_value(page, text: str) -> None:
    page.keyboard.press("Control+A")
    page.keyboard.type(text)


@pytest.mark.worker
def test_it_runs_and_cancels_a_tool_from_the_keyboard(
    live_server, worker, make_tool, developer, browser
):
    from playwright.sync_api import expect

    make_tool("counter", source=COUNTER_TS, inputs=INPUTS, extra={"label": "Counter"})
    with browser_context(
        live_server, user=developer, browser=browser, timeout_ms=30_000
    ) as context:
        page = context.new_page()
        # On other pages the skip link is the first stop and jumps past the nav.
        page.goto("/tools/counter/")
        page.keyboard.press("Tab")
        expect(page.get_by_role("link", name="Skip to main content")).to_be_focused()
        page.goto("/tools/counter/run/")

        # The run form is there to be filled in: its first field has focus on load.
        expect(page.locator("input[name=who]")).to_be_focused()
        page.keyboard.type("Grace")
        tab_to(page, "input[name=steps]")
        replace_value(page, "500")
        tab_to(page, "input[name=delay_ms]")
        replace_value(page, "200")
        tab_to(page, "select[name=pace]")
        page.keyboard.press("ArrowDown")
        expect(page.locator("select[name=pace]")).to_have_value("brisk")
        tab_to(page, "input[name=loud]")
        page.keyboard.press("Space")
        expect(page.locator("input[name=loud]")).to_be_checked()
        tab_to(page, "#run-form button[type=submit]")
        # Back one step and forward again: the order holds both ways.
        page.keyboard.press("Shift+Tab")
        expect(page.locator("input[name=loud]")).to_be_focused()
        page.keyboard.press("Tab")
        page.keyboard.press("Enter")

        # (#main: the skip link's fragment, which the redirect to the run keeps)
        expect(page).to_have_url(re.compile(r"/runs/[0-9a-f-]{36}/(#main)?$"))
        expect(page.locator("#run-updates li").first).to_be_visible(timeout=30_000)
        tab_to(page, "#cancel-run")
        # Polling swaps #run-live meanwhile; focus stays on Cancel through them.
        expect(page.locator("#cancel-run")).to_be_focused()
        page.keyboard.press("Space")
        expect(page.locator("#run-status")).to_have_text("Cancelled", timeout=15_000)
        # Focus follows the swaps to the run's status, never <body>.
        expect(page.locator("#run-status")).to_be_focused()
        assert not page.evaluate(FOCUS_ON_BODY)
        page.screenshot(path=str(ARTIFACTS / "keyboard-cancelled-1280.png"), full_page=True)

        run_id = re.search(r"/runs/([0-9a-f-]{36})/", page.url).group(1)
        run = wait_for_run(run_id, (RunStatus.CANCELLED,), timeout=5, worker=worker)
        assert run.params["who"] == "Grace" and run.params["pace"] == "brisk"
        assert run.params["loud"] is True and run.params["steps"] == 500


@pytest.mark.django_db(transaction=True)
def test_it_keeps_focus_in_the_list_when_paging_from_the_keyboard(
    live_server, make_tool, developer, browser
):
    from playwright.sync_api import expect

    tool = make_tool("quick", language="python")
    for _ in range(26):  # one more than a page
        start.start_run(
            tool.published_version, {}, actor=Actor(user=developer), via=RunVia.API, enqueue=False
        )
    with browser_context(live_server, user=developer, browser=browser) as context:
        page = context.new_page()
        page.goto("/runs/")
        tab_to(page, "a[rel=next]", limit=120)  # past 25 rows of links
        page.keyboard.press("Enter")
        expect(page).to_have_url(re.compile(r"page=2"))
        count = page.locator(".results .count")
        expect(count).to_contain_text("showing 26–26")
        # The list was swapped out with the link in it: focus lands on the new page's
        # summary, where reading goes on, not on <body>.
        expect(count).to_be_focused()
        # The next Tab goes on from there: to the new page's table (it scrolls on phones).
        page.keyboard.press("Tab")
        expect(page.get_by_role("region", name="Runs")).to_be_focused()
