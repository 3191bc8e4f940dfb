"""The documentation in docs/, rendered with the same Markdown pipeline as TOOL.md bodies.

The files are written to be read on GitHub too: they link each other by relative file
name (`sync.md#the-sync-client`), which this view turns into the console's own URLs, and
their headings get the ids GitHub gives them, so the same anchors work in both places."""

from __future__ import annotations

import html
import re
from pathlib import Path

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.html import escape
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_safe

from tools_app.catalog import rendering
from tools_app.roles import VIEWER, role_required

# Only these pages exist: the URL never names a file. Every docs/*.md is one of them
# (tests/test_docs.py checks), in the order the index lists them.
PAGES = {
    "console": ("Using the console", "console.md"),
    "tool-format": ("The tool format", "tool-format.md"),
    "cases": ("Test cases", "cases.md"),
    "http-tools": ("HTTP tools", "http-tools.md"),
    "runs": ("Runs, limits and the sandbox", "runs.md"),
    "security": ("Security", "security.md"),
    "egress": ("Network egress", "egress.md"),
    "integrations": ("Integrations and secrets", "integrations.md"),
    "agent-api": ("Agent API", "agent-api.md"),
    "mcp": ("MCP", "mcp.md"),
    "sync": ("Sync and the sync client", "sync.md"),
    "signing": ("Signed versions", "signing.md"),
    "commands": ("Commands", "commands.md"),
    "configuration": ("Configuration", "configuration.md"),
    "operations": ("Operations", "operations.md"),
    "releases": ("Releases", "releases.md"),
    "development": ("Development and CI", "development.md"),
    "design-system": ("Design system", "design-system.md"),
}
SLUG_OF_FILE = {filename: slug for slug, (_, filename) in PAGES.items()}

# A link from one docs file to another, as markdown-it and nh3 leave it.
_FILE_LINK_RE = re.compile(r'href="([a-z0-9-]+\.md)(#[^"]*)?"')
# Sections get ids; the page title (h1) needs none.
_HEADING_RE = re.compile(r"<h([2-6])>(.*?)</h\1>", re.S)


# The address docs/*.md use for "this console" (they are read on GitHub too).
EXAMPLE_ORIGIN = "https://console.example.com"


def console_origin(request: HttpRequest) -> str:
    """CONSOLE_PUBLIC_URL, else the scheme and host this request came in on."""
    return settings.PUBLIC_URL or request.build_absolute_uri("/").rstrip("/")


def docs_dir() -> Path:
    return Path(settings.BASE_DIR) / "docs"


def heading_anchor(text: str) -> str:
    """GitHub's id for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def _link_pages(page_html: str) -> str:
    """`sync.md#x` -> `/docs/sync/#x`; a link to a file that is no page is left alone."""

    def replace(match: re.Match) -> str:
        slug = SLUG_OF_FILE.get(match.group(1))
        if slug is None:
            return match.group(0)
        return f'href="{reverse("docs_page", args=[slug])}{match.group(2) or ""}"'

    return _FILE_LINK_RE.sub(replace, page_html)


def _anchor_headings(page_html: str) -> str:
    """Give each heading GitHub's id (a repeated one gets -1, -2, ... as there)."""
    seen: dict[str, int] = {}

    def replace(match: re.Match) -> str:
        level, inner = match.group(1), match.group(2)
        anchor = heading_anchor(html.unescape(re.sub(r"<[^>]+>", "", inner)))
        count = seen.get(anchor, 0)
        seen[anchor] = count + 1
        if count:
            anchor = f"{anchor}-{count}"
        return f'<h{level} id="{escape(anchor)}">{inner}</h{level}>'

    return _HEADING_RE.sub(replace, page_html)


@require_safe
@role_required(VIEWER)
def docs_index(request: HttpRequest) -> HttpResponse:
    pages = [(slug, title) for slug, (title, _) in PAGES.items()]
    return render(request, "docs/index.html", {"pages": pages})


@require_safe
@role_required(VIEWER)
def docs_page(request: HttpRequest, page: str) -> HttpResponse:
    if page not in PAGES:
        raise Http404("no such documentation page")
    title, filename = PAGES[page]
    text = (docs_dir() / filename).read_text(encoding="utf-8")
    # The files name a placeholder; the console shows its own address in their place.
    text = text.replace(EXAMPLE_ORIGIN, console_origin(request))
    pages = [(slug, name) for slug, (name, _) in PAGES.items()]
    context = {
        "title": title,
        # Both run on HTML nh3 already cleaned and add only hrefs to known pages and ids.
        "html": mark_safe(_anchor_headings(_link_pages(rendering.render_markdown(text)))),  # noqa: S308
        "pages": pages,
        "highlight_css_version": rendering.pygments_css_hash(),
    }
    return render(request, "docs/page.html", context)
