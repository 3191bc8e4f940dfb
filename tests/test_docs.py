"""The documentation pages at /docs/, rendered from docs/*.md."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from tools_app.views.docs import PAGES, docs_dir

pytestmark = pytest.mark.django_db


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


def test_its_links_between_pages_resolve(viewer_client):
    for _, filename in PAGES.values():
        for target in re.findall(r"\]\((/docs/[^)]*)\)", (docs_dir() / filename).read_text()):
            assert viewer_client.get(target).status_code == 200, (filename, target)


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
