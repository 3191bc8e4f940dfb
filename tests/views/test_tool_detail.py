"""A tool's page: safe Markdown, highlighted source, inputs, versions, registry JSON."""

from __future__ import annotations

import html
import json
import re
from html.parser import HTMLParser

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.support import tool_files, toolmd_text
from tools_app.audit import Actor
from tools_app.catalog import rendering
from tools_app.catalog.versions import publish_version, save_version, set_enabled
from tools_app.manifest import schema, toolmd
from tools_app.models import Tool, ToolVersion
from tools_app.models.tools import VersionSource, VersionState

EVIL_BODY = """# Evil tool

<script>alert("body")</script>

<img src=x onerror=alert(1)>

<a href="javascript:alert(2)">raw link</a>

[markdown link](javascript:alert(3)) [spaced](  JaVaScRiPt:alert(4))
[data](data:text/html;base64,PHNjcmlwdD4=)

[good link](https://example.com/docs) ![pixel](https://tracker.example/p.gif)

```js onclick="alert(5)"
const a = 1;
```

| a | b |
|---|---|
| <b onmouseover=alert(6)>x</b> | y |
"""


class TagCollector(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def tags_in(page: str) -> list[tuple[str, dict[str, str | None]]]:
    collector = TagCollector()
    collector.feed(page)
    return collector.tags


def section(page: str, section_id: str) -> str:
    match = re.search(rf'<section id="{section_id}">(.*?)</section>', page, re.S)
    assert match, section_id
    return match.group(1)


def registry_json(page: str) -> dict:
    match = re.search(r'<pre id="registry-json" class="json" tabindex="0">(.*?)</pre>', page, re.S)
    assert match
    return json.loads(html.unescape(match.group(1)))


@pytest.fixture
def fetch_tool(make_tool):
    return make_tool(
        "web_fetch",
        description="Fetches one page.",
        inputs={
            "url": {"type": "string", "description": "The URL to read."},
            "api_key": {"type": "string", "description": "A key.", "sensitive": True},
            "mode": {
                "type": "enum",
                "description": "How hard to try.",
                "values": "fast, thorough",
                "optional": True,
                "default": "fast",
            },
            "raw": {"type": "boolean", "description": "Keep HTML.", "optional": True},
        },
        integrations=["proxy"],
        body="# Web fetch\n\nReads **one** page. See [the docs](https://example.com/docs).\n",
    )


def test_it_redirects_anonymous_users_to_login(client, fetch_tool):
    response = client.get("/tools/web_fetch/")
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


def test_it_forbids_users_without_a_role(client, nobody, fetch_tool):
    client.force_login(nobody)
    assert client.get("/tools/web_fetch/").status_code == 403


def test_it_shows_the_tool(viewer_client, fetch_tool):
    page = viewer_client.get("/tools/web_fetch/").content.decode()

    assert "<h1>web_fetch" in page
    assert "Fetches one page." in page
    assert '<span class="badge published" title="Tool status">published</span>' in page
    assert ">proxy (missing or disabled)</span>" in page  # no such integration here
    assert "timeout 60 s" in page


def test_it_renders_the_markdown_body(viewer_client, fetch_tool):
    docs = section(viewer_client.get("/tools/web_fetch/").content.decode(), "docs")

    assert "<h1>Web fetch</h1>" in docs
    assert "<strong>one</strong>" in docs
    assert (
        '<a href="https://example.com/docs" rel="noopener noreferrer nofollow">the docs</a>' in docs
    )


def test_it_strips_scripts_handlers_and_javascript_links(viewer_client, make_tool):
    make_tool("evil", body=EVIL_BODY, description="<script>alert('d')</script>")

    page = viewer_client.get("/tools/evil/").content.decode()

    docs = section(page, "docs")
    for tag, attrs in tags_in(page):
        assert not any(name.startswith("on") for name in attrs), (tag, attrs)
        for name in ("href", "src"):
            value = (attrs.get(name) or "").strip().lower()
            assert not value.startswith(("javascript:", "data:", "vbscript:")), (tag, attrs)
        if tag == "script":
            assert attrs.get("src"), "only our own script files, never inline scripts"
        assert tag not in ("img", "iframe", "object", "embed", "style")
    assert '&lt;script&gt;alert("body")&lt;/script&gt;' in docs  # shown as text, inert
    assert '<a href="https://example.com/docs" rel="noopener noreferrer nofollow">' in docs
    # Images become links, so viewing the page never calls another host.
    assert (
        '<a href="https://tracker.example/p.gif" rel="noopener noreferrer nofollow">'
        "[image: pixel]</a>" in docs
    )
    assert "&lt;script&gt;alert(&#x27;d&#x27;)&lt;/script&gt;" in page


def test_it_highlights_fenced_code_in_the_body(viewer_client, make_tool):
    make_tool("fenced", body="# Example\n\n```python\ndef f():\n    return 1\n```\n")

    docs = section(viewer_client.get("/tools/fenced/").content.decode(), "docs")

    assert '<code class="language-python"><span class="k">def</span>' in docs


def test_it_highlights_the_entry_source(viewer_client, make_tool):
    make_tool("py_tool", language="python", source="def execute(a, b, c, d):\n    return 1\n")

    source = section(viewer_client.get("/tools/py_tool/source/").content.decode(), "source")

    assert "<code>index.py</code>" in source
    assert "entry file" in source
    assert '<div class="highlight" tabindex="0">' in source  # a keyboard can scroll it
    assert '<span class="k">def</span>' in source
    assert '<span class="nf">execute</span>' in source


def test_it_lists_other_files_and_marks_binary_ones(viewer_client, db):
    files = tool_files("with_files", "bash")
    files["lib/helper.py"] = b"import os\n"
    files["logo.png"] = b"\x89PNG\r\n\x1a\n\x00\xff"
    save_version("with_files", files, actor=Actor.system())

    source = section(viewer_client.get("/tools/with_files/source/").content.decode(), "source")

    assert "<code>index.sh</code>" in source
    assert "<code>lib/helper.py</code>" in source
    assert '<span class="kn">import</span>' in source
    assert "<code>logo.png</code>" in source
    assert "Binary file, not shown." in source
    assert source.index("index.sh") < source.index("lib/helper.py") < source.index("TOOL.md")


def test_it_serves_the_generated_highlight_stylesheet(viewer_client, fetch_tool):
    page = viewer_client.get("/tools/web_fetch/").content.decode()
    href = re.search(r'<link rel="stylesheet" href="(/tools/highlight\.css\?v=\w+)">', page)
    assert href

    response = viewer_client.get(href.group(1))

    assert response.status_code == 200
    assert response["Content-Type"] == "text/css; charset=utf-8"
    assert "max-age=31536000" in response["Cache-Control"]
    css = response.content.decode()
    assert ".highlight .k" in css
    assert ".markdown pre .k" in css
    assert "\npre {" not in css  # scoped: it does not restyle every <pre> on the site


def test_it_shows_the_inputs_table(viewer_client, fetch_tool):
    inputs = section(viewer_client.get("/tools/web_fetch/inputs/").content.decode(), "inputs")
    rows = re.findall(r"<tr>(.*?)</tr>", inputs, re.S)[1:]
    cells = [re.sub(r"<[^>]+>", "", row).split() for row in rows]

    assert [c[0] for c in cells] == ["url", "api_key", "mode", "raw"]
    assert "sensitive</span>" in rows[1] and "sensitive" not in rows[0]
    assert "<strong>yes</strong>" in rows[0]
    assert "enum: fast, thorough" in rows[2]
    assert "<code>&quot;fast&quot;</code>" in rows[2]  # defaults shown as JSON
    assert "How hard to try." in rows[2]


def test_it_says_when_a_tool_takes_no_inputs(viewer_client, make_tool):
    make_tool("plain")
    page = viewer_client.get("/tools/plain/inputs/").content.decode()
    assert "This tool takes no inputs." in page


def test_it_lists_versions(viewer_client, fetch_tool, developer):
    actor = Actor(user=developer)
    files = tool_files("web_fetch", description="Second.")
    save_version("web_fetch", files, actor=actor, note="Sharper description")

    versions = section(viewer_client.get("/tools/web_fetch/versions/").content.decode(), "versions")

    v1, v2 = ToolVersion.objects.filter(tool=fetch_tool).order_by("number")
    assert versions.index('href="/tools/web_fetch/?version=2"') < versions.index("?version=1")
    assert "Sharper description" in versions
    assert "dave" in versions
    assert f'<code title="{v2.sha256}">{v2.sha256[:12]}</code>' in versions
    assert '<span class="badge draft">draft</span>' in versions
    assert '<span class="badge published">published</span>' in versions

    publish_version(v2, actor=actor)
    versions = section(viewer_client.get("/tools/web_fetch/versions/").content.decode(), "versions")
    assert '<span class="badge superseded">superseded</span>' in versions


def test_it_names_each_versions_state_alike_on_every_page(viewer_client, fetch_tool):
    actor = Actor.system()
    v2 = save_version("web_fetch", tool_files("web_fetch", description="2."), actor=actor)
    publish_version(v2.version, actor=actor)
    save_version("web_fetch", tool_files("web_fetch", description="3."), actor=actor)
    set_enabled(fetch_tool, False, actor=actor)
    tool = Tool.objects.get(name="web_fetch")

    expected = {1: "superseded", 2: "disabled", 3: "draft"}
    states = {v.number: tool.version_state(v) for v in tool.versions.all()}
    assert states == expected
    assert all(isinstance(state, VersionState) for state in states.values())
    assert tool.status == VersionState.DISABLED
    versions = section(viewer_client.get("/tools/web_fetch/versions/").content.decode(), "versions")
    for number, state in expected.items():
        page = viewer_client.get("/tools/web_fetch/", {"version": number}).content.decode()
        assert f'version {number} <span class="badge {state}">{state}</span>' in page
        assert f'<span class="badge {state}">{state}</span>' in versions


def test_it_shows_an_older_version_on_request(viewer_client, fetch_tool):
    save_version("web_fetch", tool_files("web_fetch", description="Newer."), actor=Actor.system())

    latest = viewer_client.get("/tools/web_fetch/registry/").content.decode()
    older = viewer_client.get("/tools/web_fetch/registry/", {"version": "1"}).content.decode()

    assert "Newer." in latest and "You are looking at version" not in latest
    assert "Fetches one page." in older
    assert "You are looking at version 1." in older
    assert registry_json(older)["version"] == 1
    assert registry_json(latest)["version"] == 2


@pytest.mark.parametrize("version", ["3", "0", "abc", "-1", "1.0", "²", "9" * 11, "1\x00"])
def test_it_answers_unknown_versions_with_404(viewer_client, fetch_tool, version):
    assert viewer_client.get("/tools/web_fetch/", {"version": version}).status_code == 404


def test_it_shows_the_registry_entry_with_a_copy_button(viewer_client, fetch_tool):
    page = viewer_client.get("/tools/web_fetch/registry/").content.decode()

    version = fetch_tool.versions.get()
    manifest = toolmd.Manifest.from_dict(version.manifest)
    entry = registry_json(page)
    assert entry == schema.tool_entry(manifest, fmt="native", extra={"sha256": version.sha256})
    assert entry["input_schema"]["required"] == ["url", "api_key"]
    assert '<button type="button" class="button secondary copy" data-copy="#registry-json">' in page
    assert '<script src="/static/js/copy.js" defer></script>' in page


def test_it_notes_a_seed_version_that_replaced_a_console_edit(viewer_client, make_tool):
    make_tool("seeded")  # v1, a console edit
    files = {
        "TOOL.md": toolmd_text("seeded", version=2, description="From seed.").encode(),
        "index.ts": tool_files("seeded")["index.ts"],
    }
    save_version("seeded", files, actor=Actor.system(), source=VersionSource.SEED, number=2)

    page = viewer_client.get("/tools/seeded/").content.decode()

    assert "A newer seed version was imported" in page
    assert "replaced the console edit in version 1" in page


def test_it_does_not_note_ordinary_edits(viewer_client, make_tool):
    make_tool("edited")
    save_version("edited", tool_files("edited", description="Again."), actor=Actor.system())
    assert "A newer seed version" not in viewer_client.get("/tools/edited/").content.decode()


@pytest.mark.parametrize(
    "path",
    [
        "/tools/../",
        "/tools/%2e%2e/",
        "/tools/%2E%2E/",
        "/tools/./",
        "/tools/%00/",
        "/tools/web_fetch%00/",
        "/tools/web_fetch%0a/",
        "/tools/Web_Fetch/",
        "/tools/web-fetch/",
        "/tools/%2e%2e%2fetc%2fpasswd/",
        "/tools/..%5c..%5cwindows/",
        "/tools/%c0%ae%c0%ae/",
        "/tools/" + "a" * 65 + "/",
        "/tools/" + "a" * 100_000 + "/",
        "/tools/unknown_tool/",
    ],
)
def test_it_answers_path_tricks_with_404(viewer_client, fetch_tool, path):
    assert viewer_client.get(path).status_code == 404


def test_it_only_answers_get(viewer_client, fetch_tool):
    assert viewer_client.post("/tools/web_fetch/").status_code == 405


TABS = ["", "inputs/", "source/", "versions/", "registry/"]


@pytest.mark.parametrize("tab", TABS)
def test_query_count_does_not_grow_with_the_number_of_versions(viewer_client, make_tool, tab):
    tool = make_tool("many", inputs={"q": {"type": "string", "description": "Query."}})
    url = f"/tools/many/{tab}"
    viewer_client.get(url)  # warm up once-per-process work
    with CaptureQueriesContext(connection) as one:
        assert viewer_client.get(url).status_code == 200

    first = tool.versions.get()
    ToolVersion.objects.bulk_create(
        ToolVersion(
            tool=tool,
            number=number,
            toolmd=first.toolmd,
            manifest=first.manifest,
            files=first.files,
            sha256=f"{number:064x}",
            source=VersionSource.CONSOLE,
            note=f"edit {number}",
        )
        for number in range(2, 51)
    )
    Tool.objects.filter(pk=tool.pk).update(latest_number=50)

    with CaptureQueriesContext(connection) as many:
        page = viewer_client.get(url).content.decode()
    assert len(many) == len(one)
    if tab == "versions/":
        assert "edit 50" in page and "edit 2" in page
    else:
        with CaptureQueriesContext(connection) as older:
            assert viewer_client.get(url, {"version": "7"}).status_code == 200
        assert len(older) == len(one)


def test_it_offers_actions_by_role(
    viewer_client, developer_client, console_admin_client, fetch_tool
):
    url = "/tools/web_fetch/"
    as_viewer = viewer_client.get(url).content.decode()
    as_developer = developer_client.get(url).content.decode()
    as_admin = console_admin_client.get(url).content.decode()

    assert 'href="/tools/web_fetch/run/?version=1"' not in as_viewer
    assert 'href="/tools/web_fetch/edit/"' not in as_viewer
    assert 'href="/tools/web_fetch/run/?version=1"' in as_developer
    assert 'href="/tools/web_fetch/edit/"' in as_developer
    assert 'href="/tools/web_fetch/disable/' not in as_developer
    assert 'href="/tools/web_fetch/disable/' in as_admin


def test_it_shows_bodies_built_to_stall_the_parser_as_plain_text(viewer_client, make_tool):
    make_tool("stall", body="# Stall\n\n" + "[" * 20_000 + "<script>x</script>")

    response = viewer_client.get("/tools/stall/")

    docs = section(response.content.decode(), "docs")
    assert "too large or too complex to render as Markdown" in docs
    assert re.search(r'<pre class="plain" tabindex="0">\s*# Stall\s+\[\[\[', docs)
    assert "&lt;script&gt;x&lt;/script&gt;" in docs


def test_it_lets_a_keyboard_reach_code_blocks_but_never_lets_a_body_set_tabindex():
    """Code blocks scroll sideways on phones, so they get tabindex="0" (axe's
    scrollable-region-focusable); a body's own tabindex would hijack the Tab order."""
    body = (
        "```python\nprint('hi')\n```\n\n"
        '<pre tabindex="-1">raw</pre>\n\n<a href="/x" tabindex="1">jump</a>\n'
    )

    html_out = str(rendering.render_markdown(body))

    class Tabindexes(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.found: list[tuple[str, str | None]] = []

        def handle_starttag(self, tag, attrs):
            self.found += [(tag, value) for name, value in attrs if name == "tabindex"]

    parser = Tabindexes()
    parser.feed(html_out)
    assert '<pre tabindex="0"><code class="language-python">' in html_out
    assert parser.found == [("pre", "0")]  # the fenced block's; the body's raw tags are text
