"""No tool name collides with a console URL.

Pages about the tool collection (the new-tool form, import) live under /tools/-/, and "-"
can never be a tool name, so a tool may be called `new` or `import` and still gets its
own pages, however it arrives: sync, import_tools, the import page or the new-tool form.
The first test derives the rule from the URLconf, so a page added later at
/tools/<something>/ that a tool name could shadow fails it."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.urls import URLPattern, URLResolver, get_resolver

from tests.support import tool_files
from tests.support.editor import zip_of
from tests.support.forms import submit
from tools_app.integrations.validation import RESERVED_SLUGS
from tools_app.manifest.toolmd import NAME_RE
from tools_app.models import Tool

pytestmark = pytest.mark.django_db

NAMES = ["new", "import"]


def routes(patterns=None, prefix: str = "") -> list[str]:
    """Every path() route of the URLconf, includes flattened (regex patterns skipped)."""
    found = []
    for entry in get_resolver().url_patterns if patterns is None else patterns:
        route = getattr(entry.pattern, "_route", None)
        if route is None:
            continue
        if isinstance(entry, URLResolver):
            found += routes(entry.url_patterns, prefix + route)
        elif isinstance(entry, URLPattern):
            found.append(prefix + route)
    return found


def shadowed_literals(converter: str, rule) -> list[tuple[str, str]]:
    """(literal route, name route) pairs where a literal segment stands where the other
    route takes a `converter` and `rule` accepts that literal as a value."""
    split = [route.split("/") for route in routes()]
    clashes = []
    for named in split:
        for i, segment in enumerate(named):
            if segment != converter:
                continue
            for other in split:
                literal = other[i] if len(other) > i and other[:i] == named[:i] else ""
                if literal and "<" not in literal and rule(literal):
                    clashes.append(("/".join(other), "/".join(named)))
    return clashes


def test_no_console_url_takes_a_place_a_tool_name_could_have():
    tool_routes = [r for r in routes() if "<str:name>" in r or "<name>" in r]
    assert "tools/<str:name>/" in tool_routes and "api/v1/tools/<name>" in tool_routes

    clashes = shadowed_literals("<str:name>", NAME_RE.fullmatch)
    clashes += shadowed_literals("<name>", NAME_RE.fullmatch)

    assert clashes == []


def test_integration_pages_reserve_their_slugs():
    """Integrations keep a reserved-slug list instead; it must cover their literal pages."""
    clashes = shadowed_literals("<slug:slug>", lambda literal: True)
    assert {literal.split("/")[1] for literal, _ in clashes} <= RESERVED_SLUGS


def tool_page(client, name: str) -> str:
    response = client.get(f"/tools/{name}/")
    assert response.status_code == 200, name
    return response.content.decode()


def assert_tool_pages(client, name: str) -> None:
    html = tool_page(client, name)
    assert f"The {name} tool." in html
    for tab in ("inputs", "source", "registry"):  # the tool page's tabs
        assert client.get(f"/tools/{name}/{tab}/").status_code == 200
    assert 'id="registry-json"' in client.get(f"/tools/{name}/registry/").content.decode()
    assert client.get(f"/tools/{name}/edit/").status_code == 200
    assert client.get(f"/tools/{name}/versions/").status_code == 200
    assert f"Run {name}" in client.get(f"/tools/{name}/run/").content.decode()


def write_tool(folder: Path, name: str) -> None:
    (folder / name).mkdir(parents=True)
    for rel, data in tool_files(name).items():
        (folder / name / rel).write_bytes(data)


def test_sync_brings_tools_named_like_console_pages(tmp_path, developer_client):
    for name in NAMES:
        write_tool(tmp_path / "seed" / "tools", name)
    out = io.StringIO()

    call_command("sync_tools", "--seed", str(tmp_path / "seed" / "tools"), stdout=out)

    lines = out.getvalue()
    assert "import: imported" in lines and "new: imported" in lines
    for name in NAMES:
        assert_tool_pages(developer_client, name)
    # The console's own pages are still where the links point.
    assert "<h1>New tool</h1>" in developer_client.get("/tools/-/new/").content.decode()


def test_import_tools_command_brings_them(tmp_path, developer_client):
    for name in NAMES:
        write_tool(tmp_path / "tools", name)

    call_command("import_tools", str(tmp_path / "tools"), "--publish", stdout=io.StringIO())

    assert set(Tool.objects.values_list("name", flat=True)) == set(NAMES)
    for name in NAMES:
        assert_tool_pages(developer_client, name)


def test_the_import_page_brings_them(developer_client, console_admin_client):
    entries = {f"{n}/{p}": d for n in NAMES for p, d in tool_files(n).items()}
    upload = SimpleUploadedFile("tools.zip", zip_of(entries), "application/zip")

    changes = {"file": upload, "publish": "on"}
    response = submit(console_admin_client, "/tools/-/import/", changes, button="Import")

    assert response.status_code in (200, 302), response.content[:300]
    assert set(Tool.objects.values_list("name", flat=True)) == set(NAMES)
    for name in NAMES:
        assert_tool_pages(developer_client, name)


@pytest.mark.parametrize("name", NAMES)
def test_the_new_tool_form_creates_them(developer_client, name):
    page = developer_client.get("/tools/-/new/").content.decode()
    assert "<h1>New tool</h1>" in page

    changes = {"name": name, "language": "python", "description": f"The {name} tool."}
    response = submit(developer_client, "/tools/-/new/", changes, button="Create draft")

    assert response.status_code == 302 and response["Location"] == f"/tools/{name}/edit/"
    html = tool_page(developer_client, name)
    assert "<h1>New tool</h1>" not in html and Tool.objects.get(name=name).status == "draft"
