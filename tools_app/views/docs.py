"""The documentation in docs/ (agent API, MCP, tool format), rendered with the same
Markdown pipeline as TOOL.md bodies."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_safe

from tools_app import rendering
from tools_app.roles import VIEWER, role_required

# Only these pages exist: the URL never names a file.
PAGES = {
    "agent-api": ("Agent API", "agent-api.md"),
    "mcp": ("MCP", "mcp.md"),
    "tool-format": ("The tool format", "tool-format.md"),
    "sync": ("Sync and the sync client", "sync.md"),
}


# The address docs/*.md use for "this console" (they are read on GitHub too).
EXAMPLE_ORIGIN = "https://console.example.com"


def console_origin(request: HttpRequest) -> str:
    """CONSOLE_PUBLIC_URL, else the scheme and host this request came in on."""
    return settings.PUBLIC_URL or request.build_absolute_uri("/").rstrip("/")


def docs_dir() -> Path:
    return Path(settings.BASE_DIR) / "docs"


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
        "html": rendering.render_markdown(text),
        "pages": pages,
        "highlight_css_version": rendering.pygments_css_hash(),
    }
    return render(request, "docs/page.html", context)
