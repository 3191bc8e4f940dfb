"""Back and Forward on the filtered lists (/runs/, /tools/) in Chromium, at 1280 and 390 px:
after two filters and Back, the dropdowns and the search box show the filter the list
shows (htmx restores the page from its history cache; static/js/filters-follow-url.js
sets the fields from the address), so pressing Filter again changes nothing. Also the
tool search over several words. Screenshots go to test-artifacts/."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import parse_qs, urlsplit

import pytest
from django.core.management import call_command
from django.utils import timezone

from tests.support.browser import ARTIFACTS, browser_context, chromium
from tools_app.models import Run
from tools_app.models.runs import RunStatus, RunVia

pytestmark = pytest.mark.browser

VIEWPORTS = {"1280": {"width": 1280, "height": 900}, "390": {"width": 390, "height": 844}}


@pytest.fixture(scope="module")
def browser() -> Iterator:
    with chromium() as browser:
        yield browser


# Counts htmx's history restores on <html> (which a restore leaves in place), so that each
# Back or Forward is waited for before the next: two quick ones over entries with the same
# address (Filter pushes one) are otherwise not told apart by the address alone.
COUNT_RESTORES = """
document.addEventListener("htmx:historyRestore", () => {
  const html = document.documentElement;
  html.dataset.restores = String(Number(html.dataset.restores || 0) + 1);
});
"""


def restores(page) -> int:
    return int(page.locator("html").get_attribute("data-restores") or 0)


def back(page, forward: bool = False) -> None:
    """Back (or Forward) and wait until htmx has restored the page it leads to."""
    from playwright.sync_api import expect

    done = restores(page) + 1
    page.go_forward() if forward else page.go_back()
    expect(page.locator("html")).to_have_attribute("data-restores", str(done))


def query(url: str) -> dict[str, str]:
    """The address's filters, without the empty ones."""
    return {k: v[0] for k, v in parse_qs(urlsplit(url).query).items() if v[0]}


def at(**filters: str):
    """A wait_for_url predicate: the address says exactly these filters."""
    return lambda url: "?" in url and query(url) == filters


def fits(page, width: int) -> None:
    """The filter form is on screen and nothing widens the page (where layout matters)."""
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    for field in page.locator("form.filters :is(select, input, button)").all():
        box = field.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width, box


def filter_again(page, rows, count: int) -> None:
    """Press Filter on the form as the page shows it: the same address, the same rows."""
    from playwright.sync_api import expect

    shown = query(page.url)
    with page.expect_response(lambda response: "?" in response.url):
        page.get_by_role("button", name="Filter").click()
    page.wait_for_load_state("networkidle")
    assert query(page.url) == shown
    expect(rows).to_have_count(count)


def make_runs(make_tool, viewer, developer) -> None:
    """alpha: two succeeded (one by each person) and one failed; beta: one succeeded."""
    alpha, beta = make_tool("alpha"), make_tool("beta")
    now = timezone.now()
    for tool, status, user in [
        (alpha, RunStatus.SUCCEEDED, viewer),
        (alpha, RunStatus.SUCCEEDED, developer),
        (alpha, RunStatus.FAILED, developer),
        (beta, RunStatus.SUCCEEDED, viewer),
    ]:
        Run.objects.create(
            tool=tool,
            version=tool.published_version,
            via=RunVia.BROWSER,
            user=user,
            status=status,
            started_at=now,
            finished_at=now,
            duration=0.1,
        )


@pytest.mark.parametrize("size", VIEWPORTS)
def test_runs_back_and_forward_keep_the_filters_the_list_shows(
    live_server, viewer, developer, make_tool, transactional_db, browser, size
):
    from playwright.sync_api import expect

    make_runs(make_tool, viewer, developer)
    viewport = VIEWPORTS[size]
    with browser_context(live_server, user=viewer, viewport=viewport, browser=browser) as ctx:
        page = ctx.new_page()
        page.add_init_script(COUNT_RESTORES)
        rows = page.locator("table.runs tbody tr")
        tool, status = page.locator("#id_tool"), page.locator("#id_status")
        page.goto("/runs/")
        expect(rows).to_have_count(4)
        fits(page, viewport["width"])

        # Two filters, each a change of a dropdown (htmx swaps the results, pushes the URL).
        tool.select_option("alpha")
        page.wait_for_url(at(tool="alpha"))
        expect(rows).to_have_count(3)
        status.select_option("failed")
        page.wait_for_url(at(tool="alpha", status="failed"))
        expect(rows).to_have_count(1)
        page.screenshot(path=str(ARTIFACTS / f"runs-filtered-{size}.png"), full_page=True)

        # Back: the list shows alpha's three runs, and so do the dropdowns.
        back(page)
        page.wait_for_url(at(tool="alpha"))
        expect(rows).to_have_count(3)
        expect(tool).to_have_value("alpha")
        expect(status).to_have_value("")
        page.screenshot(path=str(ARTIFACTS / f"runs-back-{size}.png"), full_page=True)
        # Forward: the failed run, and the dropdowns say so.
        back(page, forward=True)
        page.wait_for_url(at(tool="alpha", status="failed"))
        expect(rows).to_have_count(1)
        expect(tool).to_have_value("alpha")
        expect(status).to_have_value("failed")
        filter_again(page, rows, 1)
        expect(rows.first).to_contain_text("Failed")

        # Back past the failed run (Filter pushed an entry of its own) to alpha's runs, and
        # filter again from there.
        back(page)
        page.wait_for_url(at(tool="alpha", status="failed"))
        back(page)
        page.wait_for_url(at(tool="alpha"))
        expect(tool).to_have_value("alpha")
        expect(status).to_have_value("")
        filter_again(page, rows, 3)

        # Back to the unfiltered list (the first entry, a full page load's).
        back(page)
        page.wait_for_url(at(tool="alpha"))
        back(page)
        page.wait_for_url(lambda url: urlsplit(url).path == "/runs/" and not query(url))
        expect(tool).to_have_value("")
        expect(status).to_have_value("")
        expect(rows).to_have_count(4)
        filter_again(page, rows, 4)
        fits(page, viewport["width"])


@pytest.mark.parametrize("size", VIEWPORTS)
def test_tools_back_keeps_the_search_and_dropdowns_the_list_shows(
    live_server, viewer, transactional_db, browser, size
):
    from playwright.sync_api import expect

    call_command("sync_tools", verbosity=0)  # the seed tools, as `dev.py up` imports them
    viewport = VIEWPORTS[size]
    with browser_context(live_server, user=viewer, viewport=viewport, browser=browser) as ctx:
        page = ctx.new_page()
        page.add_init_script(COUNT_RESTORES)
        rows = page.locator("table.tools tbody tr")
        search, integration = page.locator("#id_q"), page.locator("#id_integration")
        page.goto("/tools/")
        everything = rows.count()
        assert everything >= 7
        fits(page, viewport["width"])

        integration.select_option("apify")
        page.wait_for_url(lambda url: query(url).get("integration") == "apify")
        expect(rows).to_have_count(3)
        search.fill("status")
        page.wait_for_url(lambda url: query(url).get("q") == "status")
        expect(rows).to_have_count(2)

        apify_only = lambda url: query(url).get("integration") == "apify" and "q" not in query(url)  # noqa: E731
        back(page)
        page.wait_for_url(apify_only)
        expect(rows).to_have_count(3)
        expect(search).to_have_value("")
        expect(integration).to_have_value("apify")
        page.screenshot(path=str(ARTIFACTS / f"tools-back-{size}.png"), full_page=True)

        back(page, forward=True)
        page.wait_for_url(lambda url: query(url).get("q") == "status")
        expect(search).to_have_value("status")
        expect(integration).to_have_value("apify")
        expect(rows).to_have_count(2)
        filter_again(page, rows, 2)

        # Filter pushed an entry: Back twice to the apify tools, and filter from there.
        back(page)
        page.wait_for_url(lambda url: query(url).get("q") == "status")
        back(page)
        page.wait_for_url(apify_only)
        expect(search).to_have_value("")
        expect(integration).to_have_value("apify")
        filter_again(page, rows, 3)


@pytest.mark.parametrize("size", VIEWPORTS)
def test_tools_search_finds_every_word_in_any_order(
    live_server, viewer, transactional_db, browser, size
):
    """ "searxng web" finds web_search (searxng is in its description, web in its name and
    label), the other way round too; a word no tool has shows the empty state."""
    from playwright.sync_api import expect

    call_command("sync_tools", verbosity=0)
    viewport = VIEWPORTS[size]
    with browser_context(live_server, user=viewer, viewport=viewport, browser=browser) as ctx:
        page = ctx.new_page()
        rows = page.locator("table.tools tbody tr")
        search = page.locator("#id_q")
        page.goto("/tools/")
        for words in ("searxng web", "web searxng", "SEARXNG  Web"):
            search.fill(words)
            page.get_by_role("button", name="Filter").click()
            page.wait_for_url(lambda url, words=words: query(url).get("q") == words)
            expect(rows).to_have_count(1)
            expect(rows.first.locator("code")).to_have_text("web_search")
        page.screenshot(path=str(ARTIFACTS / f"tools-search-words-{size}.png"), full_page=True)
        # Every word must be there: web_fetch has "web" but not "searxng".
        search.fill("web")
        page.wait_for_url(lambda url: query(url).get("q") == "web")
        expect(rows.locator("code", has_text="web_fetch")).to_have_count(1)
        expect(rows.locator("code", has_text="web_search")).to_have_count(1)

        search.fill("searxng zebrafinch")
        page.wait_for_url(lambda url: query(url).get("q") == "searxng zebrafinch")
        empty = page.locator("#tool-results .empty")
        expect(empty).to_contain_text("No tools match this search.")
        expect(rows).to_have_count(0)
        page.screenshot(path=str(ARTIFACTS / f"tools-search-empty-{size}.png"), full_page=True)
        empty.get_by_role("link", name="Show all tools").click()
        page.wait_for_url(lambda url: urlsplit(url).path == "/tools/" and not query(url))
        assert rows.count() >= 7
        fits(page, viewport["width"])
