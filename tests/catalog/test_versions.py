"""Versioned tools: immutable versions, no duplicates, conflicts, publish and disable."""

from __future__ import annotations

import pytest

from tests.support import tool_files
from tools_app.audit import Actor
from tools_app.catalog.versions import (
    InvalidTool,
    VersionConflict,
    publish_version,
    save_version,
    set_enabled,
    unpublish,
)
from tools_app.manifest import toolmd
from tools_app.models import AuditEvent, Tool, ToolVersion

SYSTEM = Actor.system()


def test_it_creates_a_tool_with_its_first_version(db):
    saved = save_version("alpha", tool_files("alpha"), actor=SYSTEM, note="first")

    assert saved.created
    version = saved.version
    assert version.number == 1
    assert version.note == "first"
    assert version.manifest["name"] == "alpha"
    assert set(version.file_bytes()) == {"TOOL.md", "index.ts"}
    assert len(version.sha256) == 64
    assert version.is_draft
    tool = Tool.objects.get(name="alpha")
    assert tool.latest_number == 1
    assert tool.status == "draft"


def test_saving_the_same_content_twice_keeps_one_version(db):
    first = save_version("alpha", tool_files("alpha"), actor=SYSTEM)
    again = save_version("alpha", first.version.file_bytes(), actor=SYSTEM)
    also = save_version("alpha", tool_files("alpha"), actor=SYSTEM)

    assert not again.created and not also.created
    assert ToolVersion.objects.count() == 1


def test_each_change_is_a_new_version_numbered_in_the_frontmatter(db):
    save_version("alpha", tool_files("alpha"), actor=SYSTEM)
    saved = save_version("alpha", tool_files("alpha", description="Changed."), actor=SYSTEM)

    assert saved.version.number == 2
    parsed = toolmd.parse_toolmd(saved.version.toolmd)
    assert parsed.manifest.version == 2
    assert ToolVersion.objects.get(number=1).manifest["description"] == "The alpha tool."


def test_versions_are_immutable_history(db):
    save_version("alpha", tool_files("alpha"), actor=SYSTEM)
    save_version("alpha", tool_files("alpha", description="Two."), actor=SYSTEM)
    numbers = list(ToolVersion.objects.values_list("number", flat=True).order_by("number"))
    assert numbers == [1, 2]


def test_it_refuses_invalid_content_and_keeps_the_previous_state(db):
    save_version("alpha", tool_files("alpha"), actor=SYSTEM)
    bad = {"TOOL.md": b"---\nname: alpha\ninputs: [\n---\n", "index.ts": b""}

    with pytest.raises(InvalidTool) as excinfo:
        save_version("alpha", bad, actor=SYSTEM)

    assert excinfo.value.problems
    assert ToolVersion.objects.count() == 1


def test_it_refuses_unsafe_paths(db):
    files = {**tool_files("alpha"), "../escape.txt": b"x"}
    with pytest.raises(ValueError):
        save_version("alpha", files, actor=SYSTEM)
    assert not Tool.objects.exists()


def test_a_stale_base_is_a_conflict_and_loses_nothing(db):
    save_version("alpha", tool_files("alpha"), actor=SYSTEM)
    save_version("alpha", tool_files("alpha", description="Bob's."), actor=SYSTEM, base=1)

    with pytest.raises(VersionConflict) as excinfo:
        save_version("alpha", tool_files("alpha", description="Carol's."), actor=SYSTEM, base=1)

    assert excinfo.value.latest.number == 2
    assert ToolVersion.objects.count() == 2
    assert Tool.objects.get().description == "Bob's."


def test_publish_unpublish_and_disable(db, settings, django_capture_on_commit_callbacks):
    saved = save_version("alpha", tool_files("alpha"), actor=SYSTEM)
    tool = saved.version.tool
    folder = settings.DATA_PATH / "tools" / "alpha"

    # DATA_PATH follows the database only once the change is committed.
    with django_capture_on_commit_callbacks(execute=True):
        publish_version(saved.version, actor=SYSTEM)
    tool.refresh_from_db()
    assert tool.status == "published"
    assert Tool.objects.published().count() == 1
    assert (folder / "TOOL.md").exists()

    with django_capture_on_commit_callbacks(execute=True):
        set_enabled(tool, False, actor=SYSTEM)
    assert Tool.objects.published().count() == 0
    assert not folder.exists()

    with django_capture_on_commit_callbacks(execute=True):
        set_enabled(tool, True, actor=SYSTEM)
    assert folder.exists()

    with django_capture_on_commit_callbacks(execute=True):
        unpublish(tool, actor=SYSTEM)
    tool.refresh_from_db()
    assert tool.status == "draft"
    assert not folder.exists()


def test_every_state_change_is_audited(db, developer):
    actor = Actor(user=developer, ip="10.0.0.7")
    saved = save_version("alpha", tool_files("alpha"), actor=actor, note="n")
    publish_version(saved.version, actor=actor)
    set_enabled(saved.version.tool, False, actor=actor)
    unpublish(saved.version.tool, actor=actor)

    events = list(AuditEvent.objects.order_by("id"))
    assert [e.action for e in events] == [
        "tool.version.create",
        "tool.publish",
        "tool.disable",
        "tool.unpublish",
    ]
    assert all(e.actor == "dave" and e.actor_user == developer for e in events)
    assert all(e.ip == "10.0.0.7" for e in events)
    assert events[0].target == "alpha"


def test_filters_by_integration_and_search(make_tool):
    make_tool("alpha", integrations=["searxng"], description="Searches the web.")
    make_tool("beta", integrations=["email_db", "searxng"])
    make_tool("gamma")

    assert sorted(t.name for t in Tool.objects.using_integration("searxng")) == ["alpha", "beta"]
    assert [t.name for t in Tool.objects.using_integration("email_db")] == ["beta"]
    assert [t.name for t in Tool.objects.search("web")] == ["alpha"]
    assert [t.name for t in Tool.objects.search("GAMMA")] == ["gamma"]


def test_it_keeps_the_order_of_inputs_on_every_database(db):
    inputs = {
        "zeta": {"type": "string", "description": "First in the file."},
        "alpha": {"type": "integer", "description": "Second.", "optional": True},
        "mid": {"type": "boolean", "description": "Third.", "optional": True},
    }
    saved = save_version("ordered", tool_files("ordered", inputs=inputs), actor=SYSTEM)

    version = ToolVersion.objects.get(pk=saved.version.pk)  # read back from the database
    assert list(version.manifest["inputs"]) == ["zeta", "alpha", "mid"]
