"""Nothing of the template language ever reaches a page: every page of the tour, as every
role sees it, shows no `{#`, `#}`, `{%` or `{{` in its text. Django's `{# #}` is single-line
only, so a comment that wraps onto a second line is printed (it once was, on every run
form). Code is exempt: the docs and the source pages show template syntax on purpose."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support import TEMPLATES
from tests.support.browser import browser_context, chromium
from tests.support.page_tour import PAGES, make_site, pages_for, visit

pytestmark = pytest.mark.browser

MARKS = ("{#", "#}", "{%", "%}", "{{", "}}")

# The text nodes a person reads, outside code, editors and form controls, each with the
# tag of its parent so a failure says where.
VISIBLE_TEXT = """() => {
  const skip = "pre, code, textarea, script, style, template, .cm-editor, [data-source]";
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const found = [];
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const parent = node.parentElement;
    if (parent && !parent.closest(skip)) found.push([parent.tagName.toLowerCase(), node.data]);
  }
  const labelled = "body [title], body [aria-label], body [placeholder]";
  const attrs = [...document.querySelectorAll(labelled)]
    .filter((el) => !el.closest(skip))
    .flatMap((el) => ["title", "aria-label", "placeholder"]
      .filter((name) => el.hasAttribute(name))
      .map((name) => [el.tagName.toLowerCase() + "@" + name, el.getAttribute(name)]));
  return found.concat(attrs);
}"""


def leaks(page) -> list[str]:
    return [
        f"<{where}> {text.strip()[:120]!r}"
        for where, text in page.evaluate(VISIBLE_TEXT)
        if any(mark in text for mark in MARKS)
    ]


@pytest.fixture(scope="module")
def browser() -> Iterator:
    with chromium() as browser:
        yield browser


def test_it_finds_a_leak_where_there_is_one(live_server, console_admin, browser):
    """The check itself: a multi-line {# #} comment printed into a page is caught, while
    the same text inside <code> is not."""
    with browser_context(live_server, user=console_admin, browser=browser) as context:
        page = context.new_page()
        page.goto("/")
        page.evaluate(
            """() => {
              const p = document.createElement("p");
              p.textContent = "{# An explicit action drops a fragment";
              const code = document.createElement("code");
              code.textContent = "{{slug.FIELD}}";
              document.body.append(p, code);
            }"""
        )
        assert leaks(page) == ["<p> '{# An explicit action drops a fragment'"]


def test_it_shows_no_template_syntax_on_any_page_for_any_role(
    live_server, console_admin, developer, viewer, transactional_db, browser
):
    site = make_site(console_admin)
    found: dict[str, list[str]] = {}
    visited = 0
    # A developer opens every page an admin opens and gets it or its 403 page; the pages
    # reached by posting a form are the admin's (a developer may not post some of them).
    everyone = [
        (console_admin, "admin", pages_for("admin")),
        (developer, "developer", [page for page in PAGES if page.logged_in and not page.then]),
        (viewer, "viewer", pages_for("viewer")),
        (None, "anonymous", pages_for("anonymous")),
    ]
    for user, role, pages in everyone:
        with browser_context(live_server, user=user, browser=browser) as context:
            page = context.new_page()
            for tour_page in pages:
                visit(page, tour_page, site)
                visited += 1
                if seen := leaks(page):
                    found[f"{role}:{tour_page.name}"] = seen
    assert found == {}
    assert visited >= len(PAGES) + len(pages_for("viewer"))


def test_it_writes_no_comment_over_two_lines_in_any_template():
    """The same rule where it is cheapest to see: a `{#` closes on its own line."""
    unclosed = [
        f"{path.relative_to(TEMPLATES)}:{number}"
        for path in sorted(TEMPLATES.rglob("*.html"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if line.count("{#") > line.count("#}")
    ]
    assert unclosed == []
