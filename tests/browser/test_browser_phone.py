"""Every page on a 390 px phone: no sideways scrolling of the page (wide tables and code
scroll inside their own box), the code editor fits, and the nav folds into a menu that
opens from the keyboard without JavaScript. Screenshots of every page at 390 px go to
test-artifacts/<page>-390.png (the 1280 px ones come from test_browser_axe.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.browser import ARTIFACTS, axe_violations, browser_context, chromium
from tests.support.page_tour import Page, make_site, pages_for, visit

pytestmark = pytest.mark.browser

PHONE = {"width": 390, "height": 844}
NAV_LINK = ".topbar nav a[href='/runs/']"
MENU = ".topbar summary"


@pytest.fixture(scope="module")
def browser() -> Iterator:
    with chromium() as browser:
        yield browser


def page_width(page) -> int:
    return page.evaluate("document.documentElement.scrollWidth")


def wider_than_the_screen(page) -> list[str]:
    """The elements that stick out to the right of the viewport: what to fix."""
    return page.evaluate(
        """() => [...document.querySelectorAll("body *")]
              .filter((el) => el.getBoundingClientRect().right > window.innerWidth + 1)
              .filter((el) => !el.parentElement.closest("[data-overflow-ok]"))
              .slice(0, 5)
              .map((el) => el.tagName.toLowerCase() + (el.id ? "#" + el.id : "")
                           + (el.className && typeof el.className === "string"
                              ? "." + el.className.trim().split(/\\s+/).join(".") : ""))"""
    )


def check_menu(page, tour_page: Page) -> None:
    """Folded at first; Enter on the focused summary opens it, Enter again folds it."""
    from playwright.sync_api import expect

    link = page.locator(NAV_LINK)
    expect(link, f"{tour_page.name}: nav not folded").to_be_hidden()
    menu = page.locator(MENU)
    menu.focus()
    page.keyboard.press("Enter")
    expect(link, f"{tour_page.name}: menu does not open").to_be_visible()
    if tour_page.name == "tools":
        page.screenshot(path=str(ARTIFACTS / "menu-open-390.png"))
    assert link.bounding_box()["x"] + link.bounding_box()["width"] <= PHONE["width"]
    page.keyboard.press("Enter")
    expect(link).to_be_hidden()


def test_it_fits_every_page_on_a_phone(
    live_server, console_admin, viewer, transactional_db, browser
):
    """Each page as each role sees it; axe runs here too, since boxes that scroll only on
    a phone must be reachable from the keyboard there."""
    site = make_site(console_admin)
    too_wide: dict[str, tuple[int, list[str]]] = {}
    axe_found: dict[str, list[str]] = {}
    covered = 0
    for user, role in [(console_admin, "admin"), (viewer, "viewer"), (None, "anonymous")]:
        with browser_context(live_server, user=user, viewport=PHONE, browser=browser) as context:
            page = context.new_page()
            for tour_page in pages_for(role):
                visit(page, tour_page, site)
                key = f"{role}:{tour_page.name}"
                if role != "viewer" or tour_page not in pages_for("admin"):
                    shot = ARTIFACTS / f"{tour_page.name}-390.png"
                    page.screenshot(path=str(shot), full_page=True)
                if page_width(page) > PHONE["width"]:
                    too_wide[key] = (page_width(page), wider_than_the_screen(page))
                if problems := axe_violations(page):
                    axe_found[key] = problems
                if tour_page.logged_in:
                    check_menu(page, tour_page)
                covered += 1
    assert too_wide == {}, f"pages wider than {PHONE['width']} px: {too_wide}"
    assert axe_found == {}, "\n".join(f"{name}: {found}" for name, found in axe_found.items())
    assert covered == sum(len(pages_for(role)) for role in ("admin", "viewer", "anonymous"))


def test_it_fits_the_code_editor_and_scrolls_code_in_its_box(
    live_server, console_admin, transactional_db, browser
):
    from playwright.sync_api import expect

    make_site(console_admin)
    with browser_context(
        live_server, user=console_admin, viewport=PHONE, browser=browser
    ) as context:
        page = context.new_page()
        page.goto("/tools/alpha/edit/")
        expect(page.locator(".cm-editor").first).to_be_visible()
        for editor in page.locator(".cm-editor").all():
            box = editor.bounding_box()
            assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"], box
        # The source's long line scrolls inside its editor, not the page.
        scrolls = page.locator(".cm-scroller").evaluate_all(
            "els => els.map((el) => el.scrollWidth > el.clientWidth)"
        )
        assert True in scrolls, scrolls
        assert page_width(page) <= PHONE["width"]


def test_it_shows_the_whole_nav_on_a_wide_screen(
    live_server, console_admin, transactional_db, browser
):
    from playwright.sync_api import expect

    with browser_context(live_server, user=console_admin, browser=browser) as context:
        page = context.new_page()
        page.goto("/tools/")
        expect(page.locator(NAV_LINK)).to_be_visible()
        expect(page.locator(MENU)).to_be_hidden()


def test_it_opens_the_menu_from_the_keyboard_without_javascript(
    live_server, console_admin, transactional_db, browser
):
    from playwright.sync_api import expect

    with browser_context(
        live_server,
        user=console_admin,
        viewport=PHONE,
        browser=browser,
        java_script_enabled=False,
    ) as context:
        page = context.new_page()
        page.goto("/runs/")
        page.keyboard.press("Tab")  # the skip link
        page.keyboard.press("Tab")  # the brand
        page.keyboard.press("Tab")
        expect(page.locator(MENU)).to_be_focused()
        expect(page.locator(NAV_LINK)).to_be_hidden()
        page.keyboard.press("Space")
        expect(page.locator(NAV_LINK)).to_be_visible()
        page.keyboard.press("Tab")
        expect(page.locator(".topbar nav a").first).to_be_focused()
