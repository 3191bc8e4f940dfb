"""The design system (docs/design-system.md) on every page of the tour, as an admin, a
developer, a viewer and an auditor, at 1280 and 390 px: no page scrolls sideways on a
phone, lists become cards there, the configuration banner is shown to admins only and
stays one line, and every button and badge uses the documented classes with the colours
of the custom properties in console.css. Screenshots go to test-artifacts/
(design-<role>-<page>-<width>.png)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.contrib.auth.models import User
from django.test import Client

from tests.support.browser import ARTIFACTS, browser_context, chromium
from tests.support.page_tour import PAGES, Page, make_site, pages_for
from tools_app.integrations.vault import DEVELOPMENT_KEY_SHORT
from tools_app.roles import AUDITOR, set_role

pytestmark = pytest.mark.browser

WIDTHS = {1280: {"width": 1280, "height": 900}, 390: {"width": 390, "height": 844}}
# One line of the banner's small text plus its padding; it was 130 px of stacked
# sentences on a phone.
BANNER_MAX_HEIGHT = 40
# The classes a <button> or a.button may carry: the variants of docs/design-system.md,
# plus "copy", the copy script's hook.
BUTTON_CLASSES = {"button", "secondary", "danger", "link", "copy"}
# A badge's tone, from its tone class or the state name console.css maps to it.
BADGE_TONES = {
    "ok": {"ok", "published", "succeeded", "added", "bwrap", "passed"},
    "warning": {"warning", "draft", "queued", "running", "changed", "fallback", "pending"},
    "danger": {"danger", "disabled", "failed", "lost", "timed_out", "removed", "error"},
    "neutral": {"neutral", "superseded", "unchanged", "cancelled", "empty"},
    "special": {"special", "sensitive"},
}
BADGE_EXTRA = {"badge", "isolation"}  # "isolation" names what the run badge is about

# Resolves the custom properties to computed colours (rgb()), the way styles are read.
TOKENS = """
() => {
  const probe = document.createElement("span");
  document.body.append(probe);
  const out = {};
  for (const name of %s) {
    probe.style.color = `var(--${name})`;
    out[name] = getComputedStyle(probe).color;
  }
  probe.remove();
  return out;
}
"""
TOKEN_NAMES = [
    "color-accent", "color-on-accent", "color-surface", "color-danger", "color-text-muted",
    "color-banner-link", "color-banner-bg",
    *[f"color-{tone}{part}" for tone in BADGE_TONES for part in ("", "-bg")],
]  # fmt: skip

# Every button-like control on the page: its classes, text and computed colours.
CONTROLS = """
() => [...document.querySelectorAll("button, a.button, input[type=submit]")]
  .filter((el) => !el.closest(".cm-editor") && el.getClientRects().length)
  .map((el) => {
    const style = getComputedStyle(el);
    return {classes: [...el.classList], text: el.textContent.trim().slice(0, 40),
            tag: el.tagName.toLowerCase(), background: style.backgroundColor,
            color: style.color, border: style.borderTopColor,
            banner: el.closest("#config-banner") !== null};
  })
"""
BADGES = """
() => [...document.querySelectorAll(".badge")].filter((el) => el.getClientRects().length)
  .map((el) => ({classes: [...el.classList], text: el.textContent.trim(),
                 background: getComputedStyle(el).backgroundColor,
                 color: getComputedStyle(el).color}))
"""
EMPTIES = """
() => [...document.querySelectorAll(".empty")].map((el) => ({
  text: el.textContent.trim().slice(0, 40), background: getComputedStyle(el).backgroundColor,
  color: getComputedStyle(el).color}))
"""
# A list's cells at 390 px: each must show as a card line, inside the screen.
CARD_CELLS = """
() => [...document.querySelectorAll("table.cards td")].filter((el) => el.getClientRects().length)
  .map((el) => ({display: getComputedStyle(el).display, label: el.dataset.label ?? null,
                 right: el.getBoundingClientRect().right}))
"""


@pytest.fixture(scope="module")
def browser() -> Iterator:
    with chromium() as browser:
        yield browser


@pytest.fixture
def auditor(db) -> User:
    user = User.objects.create_user("audrey", "audrey@example.com", "pw-for-tests-only")
    set_role(user, AUDITOR)
    return user


def pages_open_to(user, role: str, site: dict) -> list[Page]:
    """The tour's pages this user opens without a 403 (a developer gets the edit and run
    pages an admin gets, an auditor the audit page)."""
    if role in ("admin", "viewer"):
        return pages_for(role)
    client = Client()
    client.force_login(user)
    site_free = [page for page in PAGES if page.logged_in and page.name != "forbidden"]
    return [page for page in site_free if client.get(page.path.format(**site)).status_code != 403]


def button_problems(control: dict, tokens: dict) -> list[str]:
    classes = set(control["classes"])
    name = f"{control['tag']} {control['text']!r} {sorted(classes)}"
    if not classes & {"button", "link"}:
        return [f"{name}: neither .button nor .link"]
    if unknown := classes - BUTTON_CLASSES:
        return [f"{name}: undocumented classes {sorted(unknown)}"]
    colours = (control["background"], control["color"])
    if "link" in classes:
        wanted = {tokens["color-banner-link"] if control["banner"] else tokens["color-accent"]}
        return [] if control["color"] in wanted else [f"{name}: link colour {control['color']}"]
    tone = "color-danger" if "danger" in classes else "color-accent"
    if "secondary" in classes:
        wanted = (tokens["color-surface"], tokens[tone])
    else:
        wanted = (tokens[tone], tokens["color-on-accent"])
    problems = [] if colours == wanted else [f"{name}: {colours}, not {wanted}"]
    if control["border"] != tokens[tone]:
        problems.append(f"{name}: border {control['border']}, not {tokens[tone]}")
    return problems


def badge_problems(badge: dict, tokens: dict) -> list[str]:
    classes = set(badge["classes"])
    name = f"badge {badge['text']!r} {sorted(classes)}"
    tones = [tone for tone, names in BADGE_TONES.items() if classes & names]
    if unknown := classes - BADGE_EXTRA - set().union(*BADGE_TONES.values()):
        return [f"{name}: undocumented classes {sorted(unknown)}"]
    if len(tones) > 1:
        return [f"{name}: several tones {tones}"]
    tone = tones[0] if tones else "neutral"
    wanted = (tokens[f"color-{tone}-bg"], tokens[f"color-{tone}"])
    colours = (badge["background"], badge["color"])
    return [] if colours == wanted else [f"{name}: {colours}, not the {tone} tone {wanted}"]


def check_page(page, role: str, width: int, tokens: dict) -> list[str]:
    problems: list[str] = []
    banner = page.locator("#config-banner")
    if role == "admin":
        if banner.count() != 1:
            return ["no configuration banner for an admin"]
        height = banner.bounding_box()["height"]
        if width == 390 and height > BANNER_MAX_HEIGHT:
            problems.append(f"banner {height} px tall (at most {BANNER_MAX_HEIGHT})")
        if not banner.get_by_role("link", name="Details").count():
            problems.append("banner without its Details link")
        if (
            banner.evaluate("el => getComputedStyle(el).backgroundColor")
            != tokens["color-banner-bg"]
        ):
            problems.append("banner not in --color-banner-bg")
    elif banner.count() or page.get_by_text(DEVELOPMENT_KEY_SHORT).count():
        problems.append(f"configuration banner shown to a {role}")
    page.mouse.move(0, 0)  # no hover colours
    for control in page.evaluate(CONTROLS):
        problems += button_problems(control, tokens)
    for badge in page.evaluate(BADGES):
        problems += badge_problems(badge, tokens)
    for empty in page.evaluate(EMPTIES):
        if (empty["background"], empty["color"]) != (
            tokens["color-surface"],
            tokens["color-text-muted"],
        ):
            problems.append(f"empty state {empty['text']!r} is not the documented one")
    if width == 390:
        if (scroll := page.evaluate("document.documentElement.scrollWidth")) > width:
            problems.append(f"scrolls sideways: {scroll} px wide")
        for cell in page.evaluate(CARD_CELLS):
            if cell["display"] != "block" or cell["right"] > width + 1:
                problems.append(f"list cell {cell} is not a card line")
    return problems


def tour(live_server, browser, user, role: str, site: dict) -> tuple[dict, int]:
    found: dict[str, list[str]] = {}
    pages = pages_open_to(user, role, site)
    for width, viewport in WIDTHS.items():
        with browser_context(live_server, user=user, viewport=viewport, browser=browser) as context:
            page = context.new_page()
            for tour_page in pages:
                response = page.goto(tour_page.path.format(**site))
                assert response is not None
                if tour_page.then is not None:
                    tour_page.then(page)
                tokens = page.evaluate(TOKENS % TOKEN_NAMES)
                shot = ARTIFACTS / f"design-{role}-{tour_page.name}-{width}.png"
                page.screenshot(path=str(shot), full_page=True)
                if problems := check_page(page, role, width, tokens):
                    found[f"{tour_page.name}@{width}"] = problems
    return found, len(pages)


@pytest.mark.parametrize("role", ["admin", "developer", "viewer", "auditor"])
def test_every_page_follows_the_design_system(
    live_server, console_admin, developer, viewer, auditor, transactional_db, browser, role
):
    site = make_site(console_admin)
    user = {"admin": console_admin, "developer": developer, "viewer": viewer}.get(role, auditor)
    found, visited = tour(live_server, browser, user, role, site)
    assert found == {}, "\n".join(f"{role} {name}: {problems}" for name, problems in found.items())
    # A developer opens the edit and run pages too, an auditor the audit page.
    names = {page.name for page in pages_open_to(user, role, site)}
    assert visited == len(names) >= len(pages_for("viewer")) - 1
    if role == "developer":
        assert {"tool-edit", "run-form"} <= names and "tokens" not in names
    if role == "auditor":
        assert "audit" in names and "tool-edit" not in names
