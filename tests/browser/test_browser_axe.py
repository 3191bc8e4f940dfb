"""axe-core (npm, copied to tests/build/ by `npm run build`) on every page, as an admin
and as a viewer: no serious or critical violation, and no ARIA reference to a missing id.
Also the skip link, and screenshots of every page at 1280 px in
test-artifacts/<page>-1280.png (the 390 px ones come from test_browser_phone.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.browser import (
    ARTIFACTS,
    axe_violations,
    browser_context,
    chromium,
    dangling_references,
)
from tests.support.page_tour import make_site, pages_for, visit

pytestmark = pytest.mark.browser

WIDE = {"width": 1280, "height": 900}


@pytest.fixture(scope="module")
def browser() -> Iterator:
    with chromium() as browser:
        yield browser


def walk_with_axe(live_server, browser, user, role: str, site: dict) -> dict:
    found: dict[str, list[str]] = {}
    with browser_context(live_server, user=user, viewport=WIDE, browser=browser) as context:
        page = context.new_page()
        for tour_page in pages_for(role):
            visit(page, tour_page, site)
            if role != "viewer" or tour_page not in pages_for("admin"):
                page.screenshot(path=str(ARTIFACTS / f"{tour_page.name}-1280.png"), full_page=True)
            if problems := axe_violations(page) + dangling_references(page):
                found[tour_page.name] = problems
    return found


def test_it_has_no_serious_axe_violations_for_an_admin(
    live_server, console_admin, transactional_db, browser
):
    site = make_site(console_admin)
    found = walk_with_axe(live_server, browser, console_admin, "admin", site)
    found |= walk_with_axe(live_server, browser, None, "anonymous", site)
    assert found == {}, "\n".join(f"{name}: {problems}" for name, problems in found.items())


def test_it_has_no_serious_axe_violations_for_a_viewer(
    live_server, console_admin, viewer, transactional_db, browser
):
    site = make_site(console_admin)
    found = walk_with_axe(live_server, browser, viewer, "viewer", site)
    assert found == {}, "\n".join(f"{name}: {problems}" for name, problems in found.items())


def test_it_skips_to_the_main_content_from_the_first_tab(
    live_server, console_admin, transactional_db, browser
):
    from playwright.sync_api import expect

    with browser_context(
        live_server, user=console_admin, viewport=WIDE, browser=browser
    ) as context:
        page = context.new_page()
        page.goto("/tools/")
        page.keyboard.press("Tab")
        skip = page.get_by_role("link", name="Skip to main content")
        expect(skip).to_be_focused()
        expect(skip).to_be_in_viewport()
        page.keyboard.press("Enter")
        expect(page.locator("main")).to_be_focused()
        page.keyboard.press("Tab")
        # The next stop is inside main: the "New tool" link, not the nav.
        assert page.evaluate("document.activeElement.closest('main') !== null")
