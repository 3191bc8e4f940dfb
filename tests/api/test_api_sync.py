"""The sync feed: GET /api/v1/sync/manifest and version bundles."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import zipfile

import pytest
from django.core.cache import cache
from django.test import Client

from tests.support import REPO, tool_files
from tests.support.agent_api import agent_client, reset_api_caches
from tools_app.api.conditional import make_etag, published_revision
from tools_app.audit import Actor
from tools_app.catalog import bundle, datapath, shim
from tools_app.catalog.sync import sync_tools
from tools_app.catalog.versions import save_version, set_enabled
from tools_app.models import Tool
from tools_app.signing import keyring, statement
from tools_app.signing import versions as signing

MANIFEST = "/api/v1/sync/manifest"


@pytest.fixture(autouse=True)
def fresh_caches():
    reset_api_caches()


@pytest.fixture
def client(db) -> Client:
    return agent_client("sync:read")


def test_it_lists_every_published_enabled_tool_with_hashes(make_tool, client):
    make_tool("alpha", language="python")
    make_tool("beta", language="bash")
    make_tool("gamma")
    make_tool("draft_only", publish=False)
    disabled = make_tool("off")
    set_enabled(disabled, False, actor=Actor.system())

    response = client.get(MANIFEST)
    assert response.status_code == 200
    body = response.json()
    assert body["count"] == 3
    assert [t["name"] for t in body["tools"]] == ["alpha", "beta", "gamma"]
    for entry in body["tools"]:
        version = Tool.objects.get(name=entry["name"]).published_version
        assert entry["version"] == version.number
        assert entry["bundle_url"] == f"/api/v1/tools/{entry['name']}/versions/1/bundle"
        # What is mirrored: python, bash and http tools with the generated index.js beside.
        files = version.file_bytes()
        if entry["name"] == "gamma":
            assert entry["sha256"] == version.sha256
        else:
            assert "index.js" not in files
            files["index.js"] = shim.render(version.manifest)
            assert entry["sha256"] != version.sha256
        assert entry["sha256"] == bundle.canonical_sha256(files)
        assert [f["path"] for f in entry["files"]] == sorted(files)
        for listed in entry["files"]:
            data = files[listed["path"]]
            assert listed["size"] == len(data)
            assert listed["sha256"] == hashlib.sha256(data).hexdigest()


def test_it_matches_what_the_console_mirrors_into_data_path(db, client, settings):
    sync_tools(seed_dir=REPO / "seed" / "tools")
    body = client.get(MANIFEST).json()
    assert body["count"] == len([p for p in (REPO / "seed" / "tools").iterdir() if p.is_dir()])
    for entry in body["tools"]:
        folder = datapath.tools_dir(settings.DATA_PATH) / entry["name"]
        on_disk = bundle.read_tool_dir(folder)
        on_disk.pop(datapath.MARKER)
        assert json.loads(on_disk.pop(datapath.SIGNATURE_FILE)) == entry["signature"]
        assert bundle.canonical_sha256(on_disk) == entry["sha256"]
        assert {f["path"]: f["sha256"] for f in entry["files"]} == {
            path: hashlib.sha256(data).hexdigest() for path, data in on_disk.items()
        }


def test_it_serves_a_bundle_that_checks_against_the_manifest(db, client):
    files = {
        **tool_files("packed", language="bash"),
        "lib/data.bin": bytes(range(256)),
        "README.txt": b"hello\n",
    }
    save_version("packed", files, actor=Actor.system(), publish=True)
    (entry,) = client.get(MANIFEST).json()["tools"]

    response = client.get(entry["bundle_url"])
    assert response.status_code == 200
    assert response["Content-Type"] == "application/zip"
    assert 'filename="packed-v1.zip"' in response["Content-Disposition"]
    assert response["X-Tool-SHA256"] == entry["sha256"]
    assert response["X-Tool-Version"] == "1"
    digest = base64.b64encode(hashlib.sha256(response.content).digest()).decode()
    assert response["Repr-Digest"] == f"sha-256=:{digest}:"

    archive = zipfile.ZipFile(io.BytesIO(response.content))
    assert all(name.startswith("packed/") for name in archive.namelist())
    unpacked = bundle.read_zip(response.content)["packed"]
    assert bundle.canonical_sha256(unpacked) == entry["sha256"]
    assert {f["path"]: f["sha256"] for f in entry["files"]} == {
        path: hashlib.sha256(data).hexdigest() for path, data in unpacked.items()
    }
    assert archive.getinfo("packed/index.sh").external_attr >> 16 & 0o777 == 0o755


def test_it_serves_the_same_bytes_every_time_and_304s_them(make_tool, client):
    make_tool("steady")
    url = "/api/v1/tools/steady/versions/1/bundle"
    first = client.get(url)
    cache.clear()
    assert client.get(url).content == first.content
    again = client.get(url, headers={"If-None-Match": first["ETag"]})
    assert again.status_code == 304
    assert again.content == b""
    assert again["X-Tool-SHA256"] == first["X-Tool-SHA256"]


def test_it_answers_304_to_an_unchanged_manifest_and_200_after_a_change(make_tool, client):
    make_tool("one")
    etag = client.get(MANIFEST)["ETag"]
    assert client.get(MANIFEST, headers={"If-None-Match": etag}).status_code == 304
    assert client.get(MANIFEST, headers={"If-None-Match": f"W/{etag}"}).status_code == 304
    assert client.get(MANIFEST, headers={"If-None-Match": "junk"}).status_code == 200
    make_tool("one", description="Newer.")
    changed = client.get(MANIFEST, headers={"If-None-Match": etag})
    assert changed.status_code == 200
    assert changed.json()["tools"][0]["version"] == 2


def test_it_keeps_drafts_and_unknown_versions_out_of_bundles(make_tool, client):
    make_tool("tool_a")
    make_tool("tool_a", description="Draft.", publish=False)
    assert client.get("/api/v1/tools/tool_a/versions/2/bundle").status_code == 404
    assert client.get("/api/v1/tools/nope/versions/1/bundle").json()["error"] == "unknown tool"
    assert client.get("/api/v1/tools/%2e%2e/versions/1/bundle").status_code == 404
    assert client.get("/api/v1/tools/tool_a/versions/0/bundle").status_code == 422


def test_it_needs_the_sync_scope(make_tool):
    make_tool("one")
    for url in (MANIFEST, "/api/v1/tools/one/versions/1/bundle"):
        assert Client().get(url).status_code == 401
        response = agent_client("registry:read", "tools:invoke").get(url)
        assert response.status_code == 403
        assert response.json() == {
            "error": "missing scope",
            "detail": "this token lacks the 'sync:read' scope",
        }


def test_it_builds_the_manifest_with_a_constant_number_of_queries(
    make_tool, client, django_assert_max_num_queries
):
    for i in range(50):
        make_tool(f"tool_{i:02}")
    with django_assert_max_num_queries(4):
        assert client.get(MANIFEST).json()["count"] == 50
    with django_assert_max_num_queries(2):
        assert client.get(MANIFEST, headers={"If-None-Match": "*"}).status_code == 304


def test_it_changes_the_revision_with_the_generated_index_js(make_tool, client):
    make_tool("alpha", language="python")
    revision = client.get(MANIFEST).json()["revision"]
    # A console upgrade that changes the template or the harness changes the fingerprint:
    # the same published tools then make another revision (and ETag), so clients refetch.
    assert revision == make_etag("sync", published_revision(), shim.fingerprint())
    assert revision != make_etag("sync", published_revision(), "another-shim")


def test_it_fingerprints_the_http_template_too(tmp_path, monkeypatch):
    """An http tool's index.js comes from its own template: changing it alone is a new
    fingerprint, so the manifest lists those tools as updated."""
    before = shim.fingerprint()
    changed = tmp_path / "index.http.template.js"
    changed.write_text(shim.HTTP_TEMPLATE.read_text() + "// another release\n")
    monkeypatch.setattr(shim, "HTTP_TEMPLATE", changed)
    shim.fingerprint.cache_clear()
    shim._http_template.cache_clear()
    try:
        assert shim.fingerprint() != before
    finally:
        monkeypatch.undo()
        shim.fingerprint.cache_clear()
        shim._http_template.cache_clear()
    assert shim.fingerprint() == before


def test_it_carries_each_versions_signature_model_view_and_digest(make_tool, client):
    make_tool("alpha", language="python")
    body = client.get(MANIFEST).json()
    assert body["keys_url"] == "/api/v1/signing/keys.json"
    (entry,) = body["tools"]
    version = Tool.objects.get(name="alpha").published_version
    assert entry["signature"] == version.signature
    assert entry["model"] == statement.model_view(version.manifest)
    assert entry["digest"] == signing.digest(version)
    signed = keyring.keyset().open_manifest(entry["signature"])
    assert signed["sha256"] == entry["sha256"]  # the files as mirrored, generated index.js too
    assert signed["model"] == statement.model_digest(entry["model"])


def test_it_lists_a_re_signed_tool_as_updated_since_a_revision(make_tool, client):
    """A key rotation re-signs versions without changing a file: a client that asks what
    changed must hear of the new signature (and a new keys.json is a new revision)."""
    make_tool("alpha")
    make_tool("beta")
    first = client.get(MANIFEST).json()
    reset_api_caches()
    assert client.get(f"{MANIFEST}?since={first['revision']}").json()["tools"] == []

    signing.sign(Tool.objects.get(name="alpha").published_version, publisher="system")
    reset_api_caches()
    changes = client.get(f"{MANIFEST}?since={first['revision']}").json()
    assert changes["revision"] != first["revision"]
    assert [(t["name"], t["change"]) for t in changes["tools"]] == [("alpha", "updated")]
    assert changes["keys_url"] == first["keys_url"]

    keyring.rotate(actor=Actor.system())
    reset_api_caches()
    assert client.get(MANIFEST).json()["revision"] != changes["revision"]
