"""A tool's page in tabs: Overview, Inputs, Source, Versions, Cases and Registry are each a
URL of their own (linkable, no JavaScript needed), and Registry switches between formats."""

from __future__ import annotations

import html
import json
import re

import pytest

from tests.support import tool_files
from tools_app.audit import Actor
from tools_app.catalog.versions import save_version
from tools_app.manifest import schema, toolmd

TABS = {
    "Overview": "/tools/big/",
    "Inputs": "/tools/big/inputs/",
    "Source": "/tools/big/source/",
    "Versions": "/tools/big/versions/",
    "Cases": "/tools/big/versions/1/cases/",
    "Registry": "/tools/big/registry/",
    "Analytics": "/tools/big/analytics/",
}
# The tool a first walk-through met: a 595-line source made its page a 15,000 px scroll.
BIG_SOURCE = (
    "".join(f"const line{n} = {n}; // marker_{n}\n" for n in range(594))
    + "export async function execute() { return line1; }\n"
)


@pytest.fixture
def big(make_tool):
    return make_tool(
        "big",
        source=BIG_SOURCE,
        inputs={"url": {"type": "string", "description": "The URL to read."}},
        body="# Big\n\nDoes big things.\n",
    )


def tab_links(page: str) -> list[tuple[str, str, bool]]:
    nav = re.search(r'<nav class="tabs" aria-label="Tool sections">(.*?)</nav>', page, re.S)
    assert nav, "no tab navigation"
    return [
        (text, html.unescape(href), "aria-current" in attrs)
        for href, attrs, text in re.findall(r'<a href="([^"]*)"([^>]*)>([^<]*)</a>', nav.group(1))
    ]


def registry_json(page: str) -> dict:
    match = re.search(r'<pre id="registry-json" class="json"[^>]*>(.*?)</pre>', page, re.S)
    assert match
    return json.loads(html.unescape(match.group(1)))


@pytest.mark.parametrize("current", list(TABS))
def test_every_tab_is_a_page_that_marks_itself_current(viewer_client, big, current):
    response = viewer_client.get(TABS[current])

    assert response.status_code == 200
    page = response.content.decode()
    assert tab_links(page) == [(label, url, label == current) for label, url in TABS.items()]
    assert "<h1>big" in page  # the tool's head is on every tab


def test_the_overview_shows_the_docs_but_not_the_source(viewer_client, big):
    page = viewer_client.get("/tools/big/").content.decode()

    assert "Does big things." in page
    assert "marker_300" not in page and "marker_593" not in page
    assert 'id="source"' not in page


def test_the_source_tab_shows_the_whole_highlighted_source(viewer_client, big):
    page = viewer_client.get("/tools/big/source/").content.decode()

    assert '<section id="source">' in page
    assert "marker_0" in page and "marker_593" in page
    assert '<div class="highlight"' in page
    assert '<div class="markdown">' not in page  # the docs stay on the overview


def test_the_inputs_tab_shows_the_inputs(viewer_client, big):
    page = viewer_client.get("/tools/big/inputs/").content.decode()
    assert "The URL to read." in page and "marker_1" not in page


def test_the_tabs_keep_an_older_version_selected_except_versions(viewer_client, big):
    save_version("big", tool_files("big", description="Second."), actor=Actor.system())

    page = viewer_client.get("/tools/big/source/", {"version": "1"}).content.decode()

    assert "You are looking at version 1." in page
    assert "marker_593" in page  # version 1's source, not version 2's
    links = {label: url for label, url, _ in tab_links(page)}
    assert links["Overview"] == "/tools/big/?version=1"
    assert links["Registry"] == "/tools/big/registry/?version=1"
    assert links["Versions"] == "/tools/big/versions/"
    assert links["Cases"] == "/tools/big/versions/1/cases/"  # cases belong to a version
    latest = viewer_client.get("/tools/big/source/").content.decode()
    assert {label: url for label, url, _ in tab_links(latest)} == TABS | {
        "Cases": "/tools/big/versions/2/cases/"
    }


@pytest.mark.parametrize("fmt", schema.FORMATS)
def test_the_registry_tab_shows_each_format_as_the_api_builds_it(viewer_client, big, fmt):
    response = viewer_client.get("/tools/big/registry/", {"format": fmt})

    assert response.status_code == 200
    page = response.content.decode()
    version = big.versions.get()
    manifest = toolmd.Manifest.from_dict(version.manifest)
    expected = schema.tool_entry(manifest, fmt=fmt, extra={"sha256": version.sha256})
    assert registry_json(page) == expected
    switcher = re.search(
        r'<nav class="tabs formats" aria-label="Registry format">(.*?)</nav>', page, re.S
    )
    assert switcher
    current = re.findall(r'<a href="([^"]*)" aria-current="page">([^<]*)</a>', switcher.group(1))
    assert [html.unescape(href) for href, _ in current] == [f"/tools/big/registry/?format={fmt}"]


def test_the_format_switcher_offers_native_openai_anthropic_and_mcp(viewer_client, big):
    page = viewer_client.get("/tools/big/registry/").content.decode()

    for label in ("Native", "OpenAI", "Anthropic", "MCP"):
        assert f">{label}</a>" in page
    assert registry_json(page)["name"] == "big"  # native by default
    assert 'href="/tools/big/registry/?format=anthropic"' in page
    openai = registry_json(
        viewer_client.get("/tools/big/registry/", {"format": "openai"}).content.decode()
    )
    assert openai["type"] == "function" and openai["function"]["name"] == "big"


def test_the_format_switcher_keeps_the_version(viewer_client, big):
    save_version("big", tool_files("big", description="Second."), actor=Actor.system())
    page = viewer_client.get("/tools/big/registry/", {"version": "1"}).content.decode()
    assert 'href="/tools/big/registry/?version=1&amp;format=mcp"' in page
    mcp = viewer_client.get("/tools/big/registry/", {"version": "1", "format": "mcp"})
    assert (
        registry_json(mcp.content.decode())["_meta"]["sha256"] == big.versions.get(number=1).sha256
    )


@pytest.mark.parametrize("fmt", ["nonsense", "NATIVE", "mcp\x00", "x" * 5000])
def test_an_unknown_format_is_a_clear_error(viewer_client, big, fmt):
    response = viewer_client.get("/tools/big/registry/", {"format": fmt})

    assert response.status_code == 400
    page = response.content.decode()
    assert "Unknown format: choose one of Native, OpenAI" in page
    assert 'id="registry-json"' not in page
    assert ">Anthropic</a>" in page  # the switcher is there to pick a good one


# Cases names its version in the path and answers POST (Run all cases, developers):
# tests/views/test_cases_page.py holds it to its own rules.
@pytest.mark.parametrize("url", [u for label, u in TABS.items() if label != "Cases"])
def test_the_tabs_need_a_role_and_only_answer_get(client, nobody, viewer_client, big, url):
    assert client.get(url)["Location"].startswith("/accounts/login/")
    client.force_login(nobody)
    assert client.get(url).status_code == 403
    assert viewer_client.post(url).status_code == 405


# Analytics takes its version from a form and says what is wrong with it, with a 400
# (tests/views/test_analytics_pages.py); an unknown tool is a 404 there too.
@pytest.mark.parametrize(
    "url", [u for label, u in TABS.items() if label not in ("Versions", "Cases", "Analytics")]
)
def test_the_tabs_answer_unknown_versions_and_tools_with_404(viewer_client, big, url):
    assert viewer_client.get(url, {"version": "9"}).status_code == 404
    assert viewer_client.get(url, {"version": "x"}).status_code == 404
    assert viewer_client.get(url.replace("/big/", "/nope/")).status_code == 404
