"""Publish, unpublish, disable and enable from the console, per role; DATA_PATH and the
registry follow."""

from __future__ import annotations

import html
import json
import re

import pytest
from django.conf import settings

from tests.support import tool_files
from tests.support.forms import submit
from tools_app.audit import Actor
from tools_app.catalog.datapath import MARKER
from tools_app.catalog.versions import save_version
from tools_app.models import AgentToken, AuditEvent, Tool

ACTIONS = [
    ("post", "/tools/alpha/publish/2/"),
    ("post", "/tools/alpha/unpublish/"),
    ("post", "/tools/alpha/disable/"),
    ("post", "/tools/alpha/enable/"),
]


@pytest.fixture
def alpha(db) -> Tool:
    save_version("alpha", tool_files("alpha"), actor=Actor.system(), publish=True)
    save_version("alpha", tool_files("alpha", description="Draft two."), actor=Actor.system())
    return Tool.objects.get(name="alpha")


def _registry(client, token: str, etag: str | None = None):
    headers = {"HTTP_AUTHORIZATION": f"Bearer {token}"}
    if etag:
        headers["HTTP_IF_NONE_MATCH"] = etag
    return client.get("/api/v1/registry", **headers)


CONFIRM = {
    "Publish v2": "Publish",
    "Unpublish": "Unpublish",
    "Disable": "Disable",
    "Enable": "Enable",
}


def _link(page: str, text: str) -> str:
    pattern = rf'<a class="button[^"]*"[^>]* href="([^"]+)"[^>]*>{re.escape(text)}</a>'
    [href] = re.findall(pattern, page)
    return html.unescape(href)


def press(client, button: str, **kwargs):
    """Press a tool action on the tool's page, as rendered for that client: a publishing or
    destructive one is a link to a confirm page, whose button acts."""
    if button not in CONFIRM:
        return submit(client, "/tools/alpha/", button=button, **kwargs)
    confirm = _link(client.get("/tools/alpha/").content.decode(), button)
    return submit(client, confirm, button=CONFIRM[button], **kwargs)


def _tool_dir():
    return settings.DATA_PATH / "tools" / "alpha"


@pytest.mark.django_db(transaction=True)
def test_publishing_writes_data_path_and_changes_the_registry(console_admin_client, alpha, client):
    _, token = AgentToken.issue("agent", ["registry:read"])
    before = _registry(client, token)
    assert before.status_code == 200
    [entry] = before.json()["tools"]
    assert entry["description"] == "The alpha tool."
    assert json.loads((_tool_dir() / MARKER).read_text())["version"] == 1

    response = press(console_admin_client, "Publish v2")

    assert response.status_code == 302 and response["Location"] == "/tools/alpha/"
    assert Tool.objects.get(name="alpha").published_version.number == 2
    assert json.loads((_tool_dir() / MARKER).read_text())["version"] == 2
    assert b"version: 2" in (_tool_dir() / "TOOL.md").read_bytes()
    after = _registry(client, token, etag=before["ETag"])
    assert after.status_code == 200  # not 304: the ETag changed
    assert after["ETag"] != before["ETag"]
    assert after.json()["tools"][0]["description"] == "Draft two."
    event = AuditEvent.objects.get(action="tool.publish", summary__contains="v2")
    assert event.actor == "ada"


@pytest.mark.django_db(transaction=True)
def test_disabling_removes_the_tool_from_data_path_and_the_registry(console_admin_client, alpha):
    _, token = AgentToken.issue("agent", ["registry:read"])
    assert _tool_dir().exists()

    press(console_admin_client, "Disable")

    assert not _tool_dir().exists()
    assert _registry(console_admin_client, token).json()["tools"] == []
    assert AuditEvent.objects.filter(action="tool.disable").exists()

    press(console_admin_client, "Enable")
    assert _tool_dir().exists()
    assert [t["name"] for t in _registry(console_admin_client, token).json()["tools"]] == ["alpha"]
    assert AuditEvent.objects.filter(action="tool.enable").exists()


@pytest.mark.django_db(transaction=True)
def test_unpublishing(console_admin_client, alpha):
    response = press(console_admin_client, "Unpublish", follow=True)

    assert "agents no longer get it" in response.content.decode()
    tool = Tool.objects.get(name="alpha")
    assert tool.published_version is None and tool.status == "draft"
    assert not _tool_dir().exists()
    assert AuditEvent.objects.filter(action="tool.unpublish").exists()


@pytest.mark.parametrize("method,url", ACTIONS)
def test_developers_and_viewers_cannot_publish(developer_client, viewer_client, alpha, method, url):
    for client in (developer_client, viewer_client):
        assert getattr(client, method)(url).status_code == 403
    tool = Tool.objects.get(name="alpha")
    assert tool.published_version.number == 1 and tool.enabled


@pytest.mark.parametrize("method,url", ACTIONS)
def test_anonymous_users_are_sent_to_log_in(client, alpha, method, url):
    response = getattr(client, method)(url)
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_enabling_asks_first(console_admin_client, alpha):
    press(console_admin_client, "Disable")

    page = console_admin_client.get("/tools/alpha/enable/?next=/tools/alpha/")

    assert page.status_code == 200
    text = page.content.decode()
    assert "Enable alpha?" in text and "Agents get version 1 again" in text
    assert 'class="button">Enable</button>' in text
    assert not Tool.objects.get(name="alpha").enabled  # the GET changed nothing


@pytest.mark.parametrize(
    "url,question,button,danger",
    [
        ("/tools/alpha/publish/2/", "Publish version 2 of alpha?", "Publish", False),
        ("/tools/alpha/unpublish/", "Unpublish alpha?", "Unpublish", True),
        ("/tools/alpha/disable/", "Disable alpha?", "Disable", True),
    ],
)
def test_it_asks_before_publishing_or_destroying(
    console_admin_client, alpha, url, question, button, danger
):
    page = console_admin_client.get(f"{url}?next=/tools/alpha/")
    text = page.content.decode()

    assert page.status_code == 200
    assert question in text and 'href="/tools/alpha/">Cancel</a>' in text
    assert (f'class="button danger">{button}</button>' in text) is danger
    tool = Tool.objects.get(name="alpha")  # the GET changed nothing
    assert tool.published_version.number == 1 and tool.enabled


def test_it_never_acts_on_one_click_from_the_tool_page(console_admin_client, alpha):
    page = console_admin_client.get("/tools/alpha/").content.decode()
    for path in ("/tools/alpha/publish/", "/tools/alpha/unpublish/", "/tools/alpha/disable/"):
        assert f'<form method="post" action="{path}' not in page
    Tool.objects.filter(name="alpha").update(enabled=False)
    page = console_admin_client.get("/tools/alpha/").content.decode()
    assert 'href="/tools/alpha/enable/?next=' in page
    assert "<form" not in page.split('class="tool-actions"')[1].split("</div>")[0]


def test_the_confirm_page_never_sends_elsewhere(console_admin_client, alpha):
    text = console_admin_client.get("/tools/alpha/disable/?next=https://evil.example/")
    assert "evil.example" not in text.content.decode()


def test_actions_return_to_the_page_they_came_from_but_never_elsewhere(console_admin_client, alpha):
    back = submit(
        console_admin_client, "/tools/alpha/disable/?next=/tools/alpha/", button="Disable"
    )
    assert back["Location"] == "/tools/alpha/"
    # The confirm page never carries an off-site next (above): only a forged POST does.
    away = console_admin_client.post("/tools/alpha/enable/", {"next": "https://evil.example/"})
    assert away["Location"] == "/tools/alpha/versions/"


def test_publishing_a_disabled_tool_says_it_stays_hidden(console_admin_client, alpha):
    press(console_admin_client, "Disable")
    response = press(console_admin_client, "Publish v2", follow=True)
    assert "The tool is disabled" in response.content.decode()


def test_the_actions_include_shows_buttons_by_role(
    viewer_client, developer_client, console_admin_client, alpha
):
    viewer = viewer_client.get("/tools/alpha/versions/").content.decode()
    developer = developer_client.get("/tools/alpha/versions/").content.decode()
    admin = console_admin_client.get("/tools/alpha/versions/").content.decode()

    assert "/tools/alpha/edit/" not in viewer and "Unpublish" not in viewer
    assert "/tools/alpha/edit/" in developer and "Unpublish" not in developer
    for button in ("Publish v2", "Unpublish", "Disable", "/tools/alpha/edit/"):
        assert button in admin
    assert "Download v2 (.zip)" in viewer


def test_publish_of_a_missing_version_is_404(console_admin_client, alpha):
    assert console_admin_client.post("/tools/alpha/publish/7/").status_code == 404
    assert console_admin_client.post("/tools/alpha/publish/0/").status_code == 404
    assert console_admin_client.post("/tools/nope/publish/1/").status_code == 404
