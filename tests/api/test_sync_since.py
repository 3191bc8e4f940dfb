"""Incremental sync: GET /api/v1/sync/manifest?since=<revision> answers what changed since
that manifest (added/updated with hashes, removed as tombstones), or the full manifest,
saying so, when the revision is unknown or too old."""

from __future__ import annotations

import pytest

from tests.support.agent_api import agent_client, reset_api_caches
from tools_app.api import sync as sync_api
from tools_app.audit import Actor
from tools_app.catalog.versions import set_enabled

MANIFEST = "/api/v1/sync/manifest"


@pytest.fixture(autouse=True)
def fresh(settings, tmp_path):
    settings.STATE_DIR = tmp_path
    reset_api_caches()


@pytest.fixture
def client(db):
    return agent_client("sync:read")


def manifest(client, **query) -> dict:
    reset_api_caches()  # the revision memo would hide a change made a moment ago
    response = client.get(MANIFEST, query)
    assert response.status_code == 200, response.content
    return response.json()


def test_it_answers_only_what_changed_since_a_revision(make_tool, client):
    alpha = make_tool("alpha", language="python")
    make_tool("beta", language="python")
    before = manifest(client)["revision"]

    make_tool("beta", language="python", description="Beta, better.")
    make_tool("gamma", language="bash")
    set_enabled(alpha, False, actor=Actor.system())
    now = manifest(client)
    changes = manifest(client, since=before)

    assert changes["full"] is False and changes["since"] == before
    assert changes["revision"] == now["revision"]
    assert [(t["name"], t["change"]) for t in changes["tools"]] == [
        ("beta", "updated"),
        ("gamma", "added"),
    ]
    current = {t["name"]: t for t in now["tools"]}
    for tool in changes["tools"]:
        assert tool["sha256"] == current[tool["name"]]["sha256"]
        assert tool["files"] == current[tool["name"]]["files"]
    assert changes["removed"] == [{"name": "alpha", "removed": True}]
    assert changes["count"] == 2


def test_it_answers_nothing_new_for_the_current_revision(make_tool, client):
    make_tool("alpha", language="python")
    revision = manifest(client)["revision"]

    changes = manifest(client, since=revision)

    assert changes["full"] is False and changes["tools"] == [] and changes["removed"] == []


@pytest.mark.parametrize("since", ["0" * 32, "garbage", "../../etc/passwd", "", "é" * 300])
def test_it_gives_the_full_manifest_for_an_unknown_revision(make_tool, client, since):
    make_tool("alpha", language="python")

    answer = manifest(client, since=since)

    assert answer["full"] is True and "unknown or too old" in answer["reason"]
    assert [t["name"] for t in answer["tools"]] == ["alpha"]


def test_it_gives_the_full_manifest_for_a_revision_too_old(make_tool, client, monkeypatch):
    monkeypatch.setattr(sync_api, "SNAPSHOTS_KEPT", 2)
    make_tool("alpha", language="python")
    oldest = manifest(client)["revision"]
    for i in range(3):
        make_tool(f"t{i}", language="python")
        manifest(client)

    answer = manifest(client, since=oldest)

    assert answer["full"] is True
    assert len(answer["tools"]) == 4
    assert len(list(sync_api.snapshot_dir().glob("*.json"))) == 2


def test_it_answers_304_for_an_unchanged_incremental_answer(make_tool, client):
    make_tool("alpha", language="python")
    revision = manifest(client)["revision"]
    first = client.get(MANIFEST, {"since": revision})

    again = client.get(MANIFEST, {"since": revision}, headers={"If-None-Match": first["ETag"]})

    assert again.status_code == 304
