"""Destructive and publishing actions go through a confirm page that works without
JavaScript: the pages that offer them hold links, never a one-click POST form; the GET
of each confirm page changes nothing, and only its POST acts."""

from __future__ import annotations

import pytest

from tests.support import integrations as support
from tests.support import tool_files
from tests.support.forms import forms_of
from tools_app.audit import Actor
from tools_app.catalog.versions import save_version, set_enabled
from tools_app.models import AgentToken, AuditEvent, Integration, Tool, ToolVersion

# The only forms that may post on one click from these pages: they change nothing anyone
# else sees.
HARMLESS = {"/accounts/logout/", "/warnings/dismiss/"}


@pytest.fixture
def world(db, make_tool):
    make_tool("alpha", integrations=["searxng"])
    save_version("alpha", tool_files("alpha", description="Two."), actor=Actor.system())
    make_tool("off")
    set_enabled(Tool.objects.get(name="off"), False, actor=Actor.system())
    support.create("searxng", values={"url": "https://search.example"}, secrets={"token": "x"})
    support.create("apify", secrets={"token": "y-token"})
    Integration.objects.filter(slug="apify").update(enabled=False, allow_test_runs=True)
    AgentToken.issue("bot", ["registry:read"])


PAGES = [
    "/",
    "/tools/alpha/",
    "/tools/alpha/versions/",
    "/tools/alpha/registry/",
    "/tools/off/",
    "/tools/off/versions/",
    "/integrations/",
    "/integrations/searxng/",
    "/integrations/apify/",
    "/tokens/",
]


@pytest.mark.parametrize("url", PAGES)
def test_no_page_acts_on_one_click(console_admin_client, world, url):
    response = console_admin_client.get(url)
    assert response.status_code == 200

    posting = {
        form.attrs.get("action", url)
        for form in forms_of(response.content.decode())
        if form.attrs.get("method", "get").lower() == "post"
    }

    assert posting <= HARMLESS, posting - HARMLESS


def state() -> tuple:
    return (
        list(
            Tool.objects.order_by("name").values_list(
                "name", "enabled", "published_version", "presets_allow_test_runs"
            )
        ),
        ToolVersion.objects.count(),
        list(
            Integration.objects.order_by("slug").values_list("slug", "enabled", "allow_test_runs")
        ),
        list(AgentToken.objects.values_list("revoked_at", flat=True)),
        AuditEvent.objects.count(),
    )


CONFIRM_PAGES = [
    "/tools/alpha/publish/2/",
    "/tools/alpha/unpublish/",
    "/tools/alpha/disable/",
    "/tools/off/enable/",
    "/tools/alpha/rollback/1/?base=2",
    "/tools/alpha/presets/test-runs/?allow=on",
    "/tools/alpha/presets/test-runs/",
    "/integrations/searxng/disable/",
    "/integrations/apify/enable/",
    "/integrations/searxng/test-runs/?allow=on",
    "/integrations/apify/test-runs/",
    "/integrations/searxng/delete/",
    "/tokens/{token}/revoke/",
]


@pytest.mark.parametrize("url", CONFIRM_PAGES)
def test_every_confirm_page_changes_nothing_and_posts_to_itself(console_admin_client, world, url):
    url = url.format(token=AgentToken.objects.get().pk)
    before = state()

    response = console_admin_client.get(url)

    assert response.status_code == 200
    assert state() == before
    [form] = [f for f in forms_of(response.content.decode()) if f.attrs.get("method") == "post"
              and f.attrs.get("action", url) not in HARMLESS]  # fmt: skip
    assert form.attrs.get("action", url).split("?")[0] == url.split("?")[0]
