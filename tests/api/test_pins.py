"""Pinned tokens against rug pulls (catalog/pins.py): a token pinned to digests sees (registry,
sync manifest, MCP tools/list) and runs (invoke, MCP tools/call, bundles, checks) only the
tools at the digests approved for it. A changed tool is a new tool waiting for approval,
never a silent swap; an unpinned token sees everything."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.support import tamper, tool_files
from tests.support.agent_api import reset_api_caches
from tools_app.api import mcp as console_mcp
from tools_app.audit import Actor
from tools_app.catalog import pins
from tools_app.catalog.versions import save_version
from tools_app.models import AgentToken, Run, Tool
from tools_app.signing import keyring, versions

pytestmark = pytest.mark.django_db

SCOPES = ["registry:read", "sync:read", "tools:invoke"]
RUG = "Now also forwards every answer to a third party."


@pytest.fixture(autouse=True)
def fresh_caches():
    reset_api_caches()
    yield
    reset_api_caches()


@pytest.fixture
def tools(make_tool):
    make_tool("alpha")
    make_tool("beta")


def pinned_client(*names: str) -> tuple[Client, AgentToken]:
    token, raw = AgentToken.issue("pinned", SCOPES)
    pins.approve(token, list(names) or None, actor=Actor.system())
    return Client(headers={"Authorization": f"Bearer {raw}"}), token


def plain_client() -> Client:
    _token, raw = AgentToken.issue("plain", SCOPES)
    return Client(headers={"Authorization": f"Bearer {raw}"})


def rug_pull(name: str) -> None:
    """The tool's owner publishes a new version with another description."""
    save_version(name, tool_files(name, description=RUG), actor=Actor.system(), publish=True)
    reset_api_caches()


def registry_names(client: Client) -> list[str]:
    return [tool["name"] for tool in client.get("/api/v1/registry").json()["tools"]]


def test_it_pins_to_the_signed_digests(tools):
    _client, token = pinned_client()
    assert token.pins == {
        tool.name: versions.digest(tool.published_version) for tool in Tool.objects.all()
    }


def test_it_hides_a_changed_tool_from_a_pinned_token_only(tools):
    pinned, _token = pinned_client()
    assert registry_names(pinned) == ["alpha", "beta"]

    rug_pull("beta")

    assert registry_names(pinned) == ["alpha"]
    assert registry_names(plain_client()) == ["alpha", "beta"]


def test_it_hides_a_new_tool_until_it_is_approved(tools, make_tool):
    pinned, token = pinned_client()
    make_tool("gamma")
    reset_api_caches()
    assert registry_names(pinned) == ["alpha", "beta"]

    pins.approve(token, ["gamma"], actor=Actor.system())
    reset_api_caches()

    assert registry_names(pinned) == ["alpha", "beta", "gamma"]


def test_it_answers_409_naming_pinned_and_current_digest(tools):
    pinned, token = pinned_client()
    approved = token.pins["beta"]
    rug_pull("beta")

    response = pinned.post("/api/v1/tools/beta/invoke", {"params": {}}, "application/json")

    assert response.status_code == 409
    body = response.json()
    assert body["error"] == "tool_not_approved"
    current = versions.digest(tamper.published("beta"))
    assert body["detail"]["pinned"] == approved
    assert body["detail"]["current"] == current != approved
    assert approved in body["detail"]["message"] and current in body["detail"]["message"]
    assert not Run.objects.exists()


def test_it_refuses_every_way_to_the_changed_version(tools):
    pinned, _token = pinned_client()
    rug_pull("beta")

    for method, url in [
        ("get", "/api/v1/tools/beta"),
        ("get", "/api/v1/tools/beta/versions/2"),
        ("get", "/api/v1/tools/beta/versions/2/bundle"),
        ("post", "/api/v1/tools/beta/versions/2/check"),
    ]:
        response = getattr(pinned, method)(url)
        assert response.status_code == 409, (url, response.content)
        assert response.json()["error"] == "tool_not_approved"


def test_it_still_runs_the_version_that_was_approved(tools):
    """Pinning a digest pins content: the approved older version stays usable by number."""
    pinned, _token = pinned_client()
    rug_pull("beta")

    assert pinned.get("/api/v1/tools/beta/versions/1").status_code == 200
    response = pinned.post(
        "/api/v1/tools/beta/invoke", {"params": {}, "version": 1}, "application/json"
    )
    assert response.status_code == 202


def test_it_keeps_a_re_signed_tool_approved(tools):
    """A key rotation re-signs the same content: same digest, nothing to approve."""
    pinned, _token = pinned_client()
    keyring.rotate(actor=Actor.system())
    versions.sign_published(actor=Actor.system(), only_unsigned=False)
    reset_api_caches()

    assert registry_names(pinned) == ["alpha", "beta"]
    assert pinned.post("/api/v1/tools/alpha/invoke", {}, "application/json").status_code == 202


def test_it_leaves_a_changed_tool_out_of_the_sync_manifest(tools):
    pinned, _token = pinned_client()
    before = pinned.get("/api/v1/sync/manifest")
    assert [tool["name"] for tool in before.json()["tools"]] == ["alpha", "beta"]

    rug_pull("beta")

    body = pinned.get("/api/v1/sync/manifest").json()
    assert [tool["name"] for tool in body["tools"]] == ["alpha"]
    since = pinned.get("/api/v1/sync/manifest", {"since": before.json()["revision"]}).json()
    assert since["full"] is True and [tool["name"] for tool in since["tools"]] == ["alpha"]
    plain = plain_client().get("/api/v1/sync/manifest").json()
    assert [tool["name"] for tool in plain["tools"]] == ["alpha", "beta"]


def test_it_gives_a_pinned_token_its_own_etag(tools):
    pinned, token = pinned_client("alpha")
    tag = pinned.get("/api/v1/registry")["ETag"]
    assert tag != plain_client().get("/api/v1/registry")["ETag"]

    pins.approve(token, ["beta"], actor=Actor.system())
    reset_api_caches()

    again = pinned.get("/api/v1/registry", headers={"If-None-Match": tag})
    assert again.status_code == 200
    assert [tool["name"] for tool in again.json()["tools"]] == ["alpha", "beta"]


def test_it_hides_and_refuses_a_changed_tool_over_mcp(tools):
    _client, token = pinned_client()
    rug_pull("beta")

    assert [tool.name for tool in console_mcp.list_published(token)] == ["alpha"]
    with pytest.raises(console_mcp.Refused) as refused:
        console_mcp.start("beta", {}, token, None)
    message = str(refused.value)
    assert message.startswith("tool_not_approved")
    assert token.pins["beta"] in message
    assert not Run.objects.exists()
    unpinned, _raw = AgentToken.issue("plain", SCOPES)
    assert [tool.name for tool in console_mcp.list_published(unpinned)] == ["alpha", "beta"]


def test_it_refuses_to_approve_a_tool_that_does_not_verify(tools):
    tamper.edit_description("beta", RUG)
    token, _raw = AgentToken.issue("pinned", SCOPES)

    with pytest.raises(pins.PinError, match="beta does not match its signature"):
        pins.approve(token, ["beta"], actor=Actor.system())
    # Approving everything skips it: a tampered tool is never approved.
    assert sorted(pins.approve(token, None, actor=Actor.system())) == ["alpha"]
