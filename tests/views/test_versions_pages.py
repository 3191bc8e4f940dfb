"""Version history and optimistic concurrency: a second save from an old base is a
conflict page, never an overwrite."""

from __future__ import annotations

import threading

import pytest
from django.db import connection, connections
from django.test import Client

from tests.support import require
from tests.support.editor import editor_data, form_data
from tools_app.models import Tool, ToolVersion


def test_the_history_lists_every_version_with_its_details(developer_client, make_tool):
    make_tool("alpha", publish=True)
    data = editor_data(developer_client, "alpha")
    data["toolmd"] += "\r\nMore.\r\n"
    data["note"] = "second thoughts"
    developer_client.post("/tools/alpha/edit/", data)

    response = developer_client.get("/tools/alpha/versions/")

    assert response.status_code == 200
    html = response.content.decode()
    v1, v2 = ToolVersion.objects.order_by("number")
    assert "second thoughts" in html
    assert "dave" in html  # the author of v2
    assert f'title="{v1.sha256}"' in html and f'title="{v2.sha256}"' in html
    assert v2.created_at.strftime("%Y-%m-%d %H:%M") in html
    assert '<span class="badge published">published</span>' in html  # v1
    assert '<span class="badge draft">draft</span>' in html  # v2
    assert "/tools/alpha/diff/?a=1&amp;b=2" in html
    assert "/tools/alpha/versions/2/download.zip" in html
    assert "/tools/alpha/run/?version=2" in html  # drafts can be test-invoked
    assert "roll back to v1" in html


def test_viewers_see_the_history_without_editing_buttons(viewer_client, make_tool):
    make_tool("alpha")
    html = viewer_client.get("/tools/alpha/versions/").content.decode()
    assert "v1" in html
    assert "roll back" not in html and "/edit/" not in html and "Publish" not in html


def test_two_saves_from_the_same_base_one_wins_the_other_sees_the_conflict(
    developer, console_admin, make_tool
):
    make_tool("alpha", publish=False)
    first, second = Client(), Client()
    first.force_login(developer)
    second.force_login(console_admin)
    mine = editor_data(first, "alpha")
    theirs = editor_data(second, "alpha")
    mine["toolmd"] = mine["toolmd"].replace("The alpha tool.", "Dave's description.")
    theirs["toolmd"] = theirs["toolmd"].replace("The alpha tool.", "Ada's description.")

    assert first.post("/tools/alpha/edit/", mine).status_code == 302
    response = second.post("/tools/alpha/edit/", theirs)

    assert response.status_code == 409
    html = response.content.decode()
    assert "changed while you were editing" in html
    assert "version 2</strong> was saved by dave" in html
    # Both texts and a diff between them; nothing of the second person's is lost.
    assert "Dave&#x27;s description." in html
    assert "Ada&#x27;s description." in html
    assert 'class="diff highlight"' in html
    assert 'class="code old"' in html and 'class="code new"' in html
    assert [v.manifest["description"] for v in ToolVersion.objects.order_by("number")] == [
        "The alpha tool.",
        "Dave's description.",
    ]

    # The conflict page's form carries Ada's text, now based on version 2: saving it is a
    # deliberate second step that keeps version 2 in the history.
    retry = form_data(html)
    assert retry["base"] == "2"
    assert "Ada's description." in retry["toolmd"]
    assert second.post("/tools/alpha/edit/", retry).status_code == 302
    assert [v.manifest["description"] for v in ToolVersion.objects.order_by("number")] == [
        "The alpha tool.",
        "Dave's description.",
        "Ada's description.",
    ]


@pytest.mark.django_db(transaction=True)
def test_simultaneous_saves_in_threads_one_wins_and_no_version_is_lost(
    developer, console_admin, make_tool
):
    require(
        connection.vendor == "sqlite"
        and connection.settings_dict["NAME"].startswith("file:memorydb"),
        "in-memory SQLite shares one cache between threads; run with a file DB",
    )
    make_tool("alpha", publish=False)
    clients = []
    for n, user in enumerate((developer, console_admin)):
        client = Client()
        client.force_login(user)
        data = editor_data(client, "alpha")
        data["toolmd"] = data["toolmd"].replace("The alpha tool.", f"Edit number {n}.")
        clients.append((client, data))
    barrier = threading.Barrier(len(clients))
    statuses: list[int] = []

    def save(client: Client, data: dict) -> None:
        try:
            barrier.wait(timeout=10)
            statuses.append(client.post("/tools/alpha/edit/", data).status_code)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=save, args=pair) for pair in clients]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert sorted(statuses) == [302, 409]
    descriptions = [v.manifest["description"] for v in ToolVersion.objects.order_by("number")]
    assert descriptions[0] == "The alpha tool."
    assert len(descriptions) == 2 and descriptions[1] in ("Edit number 0.", "Edit number 1.")
    assert Tool.objects.get(name="alpha").latest_number == 2


def test_a_forged_base_is_a_conflict_not_an_overwrite(developer_client, make_tool):
    make_tool("alpha", publish=False)
    data = editor_data(developer_client, "alpha")
    data["toolmd"] += "x\r\n"
    data["base"] = "7"

    response = developer_client.post("/tools/alpha/edit/", data)

    assert response.status_code == 409
    assert ToolVersion.objects.count() == 1


def test_the_history_pages_many_versions(developer_client, make_tool):
    from tests.support import tool_files
    from tools_app.audit import Actor
    from tools_app.catalog.versions import save_version

    make_tool("alpha", publish=False)
    for n in range(2, 56):
        save_version("alpha", tool_files("alpha", description=f"Change {n}."), actor=Actor.system())

    first = developer_client.get("/tools/alpha/versions/").content.decode()
    second = developer_client.get("/tools/alpha/versions/?page=2").content.decode()

    assert 'id="v55"' in first and 'id="v6"' in first and 'id="v5"' not in first
    assert 'id="v5"' in second and 'id="v1"' in second
