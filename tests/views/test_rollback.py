"""Roll back: a new version with an old version's content; history is never rewritten."""

from __future__ import annotations

import pytest

from tests.support import tool_files
from tests.support.forms import find_form, link, submit
from tools_app.audit import Actor
from tools_app.catalog.versions import VersionConflict, rollback, save_version
from tools_app.manifest import toolmd
from tools_app.models import AuditEvent, Tool, ToolVersion
from tools_app.models.tools import VersionSource

SYSTEM = Actor.system()


@pytest.fixture
def three_versions(db) -> Tool:
    for text in ("One.", "Two.", "Three."):
        save_version("alpha", tool_files("alpha", description=text), actor=SYSTEM)
    return Tool.objects.get(name="alpha")


def test_it_creates_a_new_version_with_the_old_content(three_versions):
    saved = rollback(three_versions, 1, actor=SYSTEM)

    assert saved.created
    version = saved.version
    assert version.number == 4
    assert version.source == VersionSource.ROLLBACK
    assert version.note == "roll back to v1"
    assert version.manifest["description"] == "One."
    assert toolmd.parse_toolmd(version.toolmd).manifest.version == 4
    old = ToolVersion.objects.get(tool=three_versions, number=1)
    assert version.file_bytes()["index.ts"] == old.file_bytes()["index.ts"]
    # Nothing before it changed.
    descriptions = [v.manifest["description"] for v in ToolVersion.objects.order_by("number")]
    assert descriptions == ["One.", "Two.", "Three.", "One."]
    event = AuditEvent.objects.get(action="tool.rollback")
    assert event.data == {"from": 1, "version": 4}


def test_rolling_back_to_the_latest_content_creates_nothing(three_versions):
    rollback(three_versions, 1, actor=SYSTEM)
    again = rollback(three_versions, 1, actor=SYSTEM)
    assert not again.created and again.version.number == 4
    assert ToolVersion.objects.count() == 4
    assert AuditEvent.objects.filter(action="tool.rollback").count() == 1


def test_a_stale_base_is_a_conflict(three_versions):
    with pytest.raises(VersionConflict):
        rollback(three_versions, 1, actor=SYSTEM, base=2)
    assert ToolVersion.objects.count() == 3


def test_the_rollback_link_asks_first_and_the_confirm_page_rolls_back(
    developer_client, three_versions
):
    confirm = link(
        developer_client.get("/tools/alpha/versions/").content.decode(), "roll back to v2"
    )
    assert confirm.startswith("/tools/alpha/rollback/2/?base=3")

    page = developer_client.get(confirm)
    assert page.status_code == 200
    assert "Roll alpha back to version 2?" in page.content.decode()
    assert ToolVersion.objects.count() == 3  # the GET changed nothing

    response = submit(developer_client, confirm, button="Roll back", follow=True)

    assert response.status_code == 200
    assert response.redirect_chain[-1][0] == "/tools/alpha/versions/"
    assert "version 4 has the content of version 2" in response.content.decode()
    latest = ToolVersion.objects.get(number=4)
    assert latest.manifest["description"] == "Two."
    assert latest.author.username == "dave"
    assert latest.is_draft


def test_the_rollback_button_refuses_when_someone_saved_meanwhile(developer_client, three_versions):
    confirm = link(
        developer_client.get("/tools/alpha/versions/").content.decode(), "roll back to v1"
    )
    form = find_form(developer_client.get(confirm).content.decode(), button="Roll back")
    save_version("alpha", tool_files("alpha", description="Four."), actor=SYSTEM)

    response = developer_client.post(confirm, form.data(), follow=True)

    assert "Not rolled back: version 4 was saved meanwhile" in response.content.decode()
    assert ToolVersion.objects.count() == 4


def test_rollback_needs_a_developer_and_acts_only_on_post(
    viewer_client, developer_client, three_versions
):
    assert viewer_client.post("/tools/alpha/rollback/1/", {"base": "3"}).status_code == 403
    assert viewer_client.get("/tools/alpha/rollback/1/").status_code == 403
    assert developer_client.get("/tools/alpha/rollback/1/?base=abc").status_code == 200
    assert developer_client.post("/tools/alpha/rollback/9/", {"base": "3"}).status_code == 404
    assert developer_client.get("/tools/alpha/rollback/9/").status_code == 404
    assert ToolVersion.objects.count() == 3
