"""The documentation pages at /docs/, rendered from docs/*.md, and the links between them
and from README.md (read on GitHub, so every relative link must name a file of the repo)."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from django.urls import reverse

from tools_app.views.docs import PAGES, docs_dir, heading_anchor

REPO = docs_dir().parent
_FENCE_RE = re.compile(r"^```.*?^```", re.M | re.S)
_CODE_RE = re.compile(r"`[^`\n]*`")
_LINK_RE = re.compile(r"\]\(([^)\s]+)\)")

pytestmark = pytest.mark.django_db


def markdown_files() -> list[Path]:
    return [REPO / "README.md", *sorted(docs_dir().glob("*.md"))]


def prose(path: Path) -> str:
    """The file without code: a `](` in a code span or block is no link."""
    return _CODE_RE.sub("", _FENCE_RE.sub("", path.read_text(encoding="utf-8")))


def links(path: Path) -> list[str]:
    return _LINK_RE.findall(prose(path))


def anchors(path: Path) -> set[str]:
    """The ids GitHub (and the docs view) give the file's headings."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    for line in _FENCE_RE.sub("", path.read_text(encoding="utf-8")).splitlines():
        if match := re.match(r"#{1,6} (.*)", line):
            anchor = heading_anchor(match.group(1).replace("`", ""))
            count = seen.get(anchor, 0)
            seen[anchor] = count + 1
            found.add(f"{anchor}-{count}" if count else anchor)
    return found


def test_it_lists_and_renders_every_page(viewer_client):
    index = viewer_client.get(reverse("docs"))
    assert index.status_code == 200
    for slug, (title, filename) in PAGES.items():
        assert (docs_dir() / filename).is_file()
        url = reverse("docs_page", args=[slug])
        assert url.encode() in index.content
        page = viewer_client.get(url)
        assert page.status_code == 200
        assert f"<h1>{title}</h1>".encode() in page.content


def test_it_serves_every_file_in_docs():
    assert sorted(f for _, f in PAGES.values()) == sorted(p.name for p in docs_dir().glob("*.md"))


def test_every_relative_link_names_a_file_and_heading_of_the_repo():
    checked = 0
    for path in markdown_files():
        for target in links(path):
            parts = urlsplit(target)
            if parts.scheme or target.startswith("/"):
                continue  # absolute: another site, or the console's own pages
            linked = (path.parent / parts.path).resolve() if parts.path else path
            assert linked.is_relative_to(REPO) and linked.exists(), (path.name, target)
            if parts.fragment and linked.suffix == ".md":
                assert parts.fragment in anchors(linked), (path.name, target)
            checked += 1
    assert checked > 40  # the files do link each other


def test_the_readme_links_every_docs_page():
    linked = {urlsplit(t).path for t in links(REPO / "README.md")}
    for _, filename in PAGES.values():
        assert f"docs/{filename}" in linked, filename


def test_its_links_between_pages_resolve_in_the_console(viewer_client):
    pages = {}
    for slug in PAGES:
        page = viewer_client.get(reverse("docs_page", args=[slug])).content.decode()
        pages[reverse("docs_page", args=[slug])] = page
    followed = 0
    for url, page in pages.items():
        body = page.split('<article class="markdown">', 1)[1]
        hrefs = re.findall(r'href="([^"]*)"', body)
        assert not [h for h in hrefs if ".md" in h], url  # every file link became a page's
        for href in hrefs:
            parts = urlsplit(href)
            if not parts.path.startswith("/docs/"):
                continue
            assert parts.path in pages, (url, href)
            if parts.fragment:
                assert f'id="{parts.fragment}"' in pages[parts.path], (url, href)
            followed += 1
    assert followed > 20


def test_it_documents_the_agent_interfaces():
    text = " ".join((docs_dir() / f).read_text() for _, f in PAGES.values())
    for phrase in ("openai-responses", "strict=true", "?since=", "secrets:read", "/mcp",
                   "notifications/progress", "index.py", "fd 3", "sync-tools.mjs",
                   "--watch", "CONSOLE_TOKEN", ".sync-tools-state.json", "canonical sha256",
                   "index.template.js", "listChanged", "structuredContent"):  # fmt: skip
        assert phrase in text, phrase


def test_it_documents_every_exit_code_of_the_sync_client():
    client = (docs_dir().parent / "clients" / "sync-tools.mjs").read_text()
    codes = re.search(r"const EXIT = \{([^}]*)\}", client).group(1)
    documented = re.findall(r"^\| (\d) \|", (docs_dir() / "sync.md").read_text(), re.M)
    assert sorted(documented) == sorted(re.findall(r": (\d)", codes))


def test_it_needs_a_login_and_knows_only_its_pages(client, viewer_client):
    assert client.get(reverse("docs")).status_code == 302
    for page in ("nope", "..", "agent-api.md", "README"):
        assert viewer_client.get(f"/docs/{page}/").status_code == 404


def test_it_shows_this_consoles_address_instead_of_the_placeholder(viewer_client, settings):
    settings.PUBLIC_URL = ""
    page = viewer_client.get("/docs/mcp/").content.decode()
    assert "console.example.com" not in page
    assert "http://testserver/mcp" in page

    settings.PUBLIC_URL = "https://tools.internal.example"
    sync = viewer_client.get("/docs/sync/").content.decode()
    assert "--url https://tools.internal.example --dir /data/tools" in sync
