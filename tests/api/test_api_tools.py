"""GET /api/v1/tools/<name> and /api/v1/tools/<name>/versions/<n>."""

from __future__ import annotations

import base64
import hashlib

import pytest
from django.test import Client
from jsonschema import Draft202012Validator

from tests.support import tool_files
from tests.support.agent_api import agent_client, reset_api_caches
from tools_app.audit import Actor
from tools_app.catalog.versions import publish_version, save_version, set_enabled, unpublish
from tools_app.models import Tool

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe"


@pytest.fixture(autouse=True)
def fresh_caches():
    reset_api_caches()


@pytest.fixture
def client(db) -> Client:
    return agent_client("registry:read")


def test_it_returns_the_published_version_with_manifest_body_files_and_sha256(make_tool, client):
    make_tool("fetch", inputs={"url": {"type": "string", "description": "Where."}})
    version = Tool.objects.get(name="fetch").published_version

    response = client.get("/api/v1/tools/fetch")
    assert response.status_code == 200
    body = response.json()
    assert body["name"] == "fetch"
    assert body["version"] == body["published_version"] == 1
    assert body["sha256"] == version.sha256
    assert body["manifest"] == version.manifest
    assert body["body"].lstrip().startswith("# Tool")
    assert body["toolmd"] == version.toolmd
    Draft202012Validator.check_schema(body["input_schema"])
    assert body["input_schema"]["required"] == ["url"]
    files = {f["path"]: f for f in body["files"]}
    assert set(files) == {"TOOL.md", "index.ts"}
    for path, data in version.file_bytes().items():
        assert files[path]["encoding"] == "utf-8"
        assert files[path]["content"].encode() == data
        assert files[path]["size"] == len(data)
        assert files[path]["sha256"] == hashlib.sha256(data).hexdigest()
    assert body["bundle_url"] == "/api/v1/tools/fetch/versions/1/bundle"
    assert body["versions"] == [
        {
            "version": 1,
            "sha256": version.sha256,
            "published_at": body["versions"][0]["published_at"],
            "published_with_failing_cases": False,
            "url": "/api/v1/tools/fetch/versions/1",
        }
    ]


def test_it_sends_binary_files_as_base64(db, client):
    files = {**tool_files("pic"), "logo.png": PNG}
    save_version("pic", files, actor=Actor.system(), publish=True)
    body = client.get("/api/v1/tools/pic/versions/1").json()
    logo = next(f for f in body["files"] if f["path"] == "logo.png")
    assert logo["encoding"] == "base64"
    assert base64.b64decode(logo["content"]) == PNG
    assert logo["sha256"] == hashlib.sha256(PNG).hexdigest()


def test_it_serves_every_published_version_but_no_draft(make_tool, client):
    make_tool("multi", description="First.")
    make_tool("multi", description="Second.")  # v2, published
    make_tool("multi", description="Third, a draft.", publish=False)  # v3

    assert client.get("/api/v1/tools/multi").json()["version"] == 2
    old = client.get("/api/v1/tools/multi/versions/1")
    assert old.status_code == 200
    assert old.json()["manifest"]["description"] == "First."
    assert client.get("/api/v1/tools/multi/versions/2").json()["manifest"]["version"] == 2
    draft = client.get("/api/v1/tools/multi/versions/3")
    assert draft.status_code == 404
    assert draft.json()["error"] == "unknown version"
    listed = [v["version"] for v in client.get("/api/v1/tools/multi").json()["versions"]]
    assert listed == [2, 1]


def test_it_hides_disabled_unpublished_and_draft_only_tools(make_tool, client):
    disabled = make_tool("disabled_tool")
    set_enabled(disabled, False, actor=Actor.system())
    unpublished = make_tool("gone")
    unpublish(unpublished, actor=Actor.system())
    make_tool("draft_only", publish=False)
    for name in ("disabled_tool", "gone", "draft_only", "no_such_tool"):
        for url in (f"/api/v1/tools/{name}", f"/api/v1/tools/{name}/versions/1"):
            response = client.get(url)
            assert response.status_code == 404, url
            assert response.json()["error"] == "unknown tool"


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/tools/..",
        "/api/v1/tools/%2e%2e",
        "/api/v1/tools/%2E%2E/versions/1",
        "/api/v1/tools/a%00b",
        "/api/v1/tools/%00",
        "/api/v1/tools/Web_Fetch",
        "/api/v1/tools/" + "a" * 65,
        "/api/v1/tools/" + "a" * 5000,
        "/api/v1/tools/caf%C3%A9",
        "/api/v1/tools/%ff%fe",
        "/api/v1/tools/a%20b/versions/1",
        "/api/v1/tools/.env",
    ],
)
def test_it_answers_404_json_to_path_tricks_in_tool_names(make_tool, client, path):
    make_tool("real")
    response = client.get(path)
    assert response.status_code == 404
    body = response.json()
    assert body["error"] == "unknown tool"
    assert len(response.content) < 1000  # a long name is not echoed whole


@pytest.mark.parametrize(
    "number", ["0", "-1", "abc", "1.5", "1e3", "99999999999999999999", "%00", "2147483648"]
)
def test_it_answers_422_json_to_a_bad_version_number(make_tool, client, number):
    make_tool("real")
    response = client.get(f"/api/v1/tools/real/versions/{number}")
    assert response.status_code == 422
    assert response.json()["error"] == "invalid request"


def test_it_answers_404_to_an_unknown_version(make_tool, client):
    make_tool("real")
    response = client.get("/api/v1/tools/real/versions/2147483647")
    assert response.status_code == 404
    assert response.json()["error"] == "unknown version"


def test_it_answers_304_for_an_unchanged_tool_and_version(make_tool, client):
    make_tool("real")
    for url in ("/api/v1/tools/real", "/api/v1/tools/real/versions/1"):
        etag = client.get(url)["ETag"]
        assert client.get(url, headers={"If-None-Match": etag}).status_code == 304
    tool_etag = client.get("/api/v1/tools/real")["ETag"]
    make_tool("real", description="Changed.")
    assert client.get("/api/v1/tools/real", headers={"If-None-Match": tool_etag}).status_code == 200


def test_it_reflects_a_rollback(make_tool, client):
    make_tool("real", description="One.")
    tool = make_tool("real", description="Two.")
    assert client.get("/api/v1/tools/real").json()["version"] == 2
    publish_version(tool.versions.get(number=1), actor=Actor.system())
    assert client.get("/api/v1/tools/real").json()["version"] == 1


def test_it_needs_the_registry_scope(make_tool):
    make_tool("real")
    assert Client().get("/api/v1/tools/real").status_code == 401
    response = agent_client("sync:read").get("/api/v1/tools/real/versions/1")
    assert response.status_code == 403
    assert response.json()["error"] == "missing scope"


def test_it_answers_with_a_constant_number_of_queries(
    make_tool, client, django_assert_max_num_queries
):
    for i in range(20):
        make_tool("busy", description=f"Version {i}.")
    # token + last_used_at, tool, published versions list, keys.json (the body's version
    # is verified against its signature before it is served)
    with django_assert_max_num_queries(5):
        assert client.get("/api/v1/tools/busy").json()["version"] == 20
    with django_assert_max_num_queries(3):
        assert client.get("/api/v1/tools/busy/versions/3").status_code == 200
