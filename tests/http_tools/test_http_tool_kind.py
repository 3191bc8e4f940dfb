"""kind: http tools are listed as http, never as the parser's default language
(typescript), in the tool list, its filter, the tool page, Django admin and the registry."""

from __future__ import annotations

import json

import pytest

from tests.support.agent_api import agent_client, reset_api_caches
from tools_app.audit import Actor
from tools_app.catalog.versions import save_version
from tools_app.models import Tool

SAMPLE = {"source": "https://docs.example.com/x", "status": 200, "body": {"id": "1"}}
TOOLMD = (
    "---\nname: remote\ndescription: Calls an API.\nkind: http\n"
    "request:\n  method: GET\n  url: https://api.example.com/items\n"
    "outputs:\n  id: {type: string, path: id}\n---\n# Remote\n"
)


@pytest.fixture
def remote(db, settings, make_tool) -> Tool:
    settings.ALLOWED_HOSTS = ["testserver"]
    files = {"TOOL.md": TOOLMD.encode(), "samples/x.json": json.dumps(SAMPLE).encode()}
    save_version("remote", files, actor=Actor.system(), publish=True)
    make_tool("local", language="typescript")
    return Tool.objects.get(name="remote")


def row_of(page: str, name: str) -> str:
    start = page.index(f"/tools/{name}/")
    return page[start : page.index("</tr>", start)]


def test_it_lists_an_http_tool_as_http(remote, viewer_client) -> None:
    assert remote.language == "http"
    page = viewer_client.get("/tools/").content.decode()
    assert "http (no code)" in row_of(page, "remote")
    assert "Typescript" not in row_of(page, "remote")
    assert "Typescript" in row_of(page, "local")


def test_it_filters_http_tools(remote, viewer_client) -> None:
    page = viewer_client.get("/tools/", {"language": "http"}).content.decode()
    assert "/tools/remote/" in page and "/tools/local/" not in page
    assert '<option value="http" selected>http (no code)</option>' in page


def test_it_says_http_on_the_tool_page(remote, viewer_client) -> None:
    page = viewer_client.get("/tools/remote/").content.decode()
    assert "· http (no code)" in page and "typescript" not in page
    assert "has no entry file" not in page


def test_it_says_http_in_admin(remote, client, django_user_model) -> None:
    client.force_login(django_user_model.objects.create_superuser("root", "r@example.com", "pw"))
    page = client.get("/admin/tools_app/tool/").content.decode()
    assert "http (no code)" in page


def test_it_says_http_in_the_native_registry(remote) -> None:
    reset_api_caches()
    tools = agent_client().get("/api/v1/registry", {"format": "native"}).json()["tools"]
    languages = {t["name"]: t["language"] for t in tools}
    assert languages == {"local": "typescript", "remote": "http"}
