"""HTTP tools (tools_app/http_tools/execute.py) that call an API with an OAuth integration's access
token, run for real against the django-oauth-toolkit server of tests/oauth_server: the
token by its env name in a template, one refresh and retry on a 401, and a second 401 or
a failed refresh told in words ("reconnect integration X")."""

from __future__ import annotations

import json

import pytest

from tests.support import oauth as oauth_support
from tests.support.oauth import PUBLIC_URL, OAuthServer, connect, make, record_of, tokens
from tools_app.audit import Actor
from tools_app.catalog.versions import save_version
from tools_app.models import OAuthConnection, OAuthState, Run, Tool
from tools_app.models.runs import RunStatus, RunVia
from tools_app.runs import execute as run_execute
from tools_app.runs import start

oauth_server = oauth_support.oauth_server
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def console(settings, oauth_server: OAuthServer) -> None:
    settings.PUBLIC_URL = PUBLIC_URL
    # The console is console.test; the provider's API on 127.0.0.1 is allowed as an
    # admin would allow a local service.
    settings.ALLOWED_HOSTS = ["console.test", "testserver"]
    settings.TOOL_NETWORK_ALLOW = f"127.0.0.1:{oauth_server.port}"


def tool(server: OAuthServer, path: str) -> Tool:
    text = (
        "---\nname: whoami\ndescription: Asks the provider's API who the token is for.\n"
        "kind: http\ntimeout: 60\nintegrations: [provider]\nrequest:\n  method: GET\n"
        f"  url: {server.url}{path}\n"
        '  headers: {Authorization: "Bearer {{provider.OAUTH2_ACCESS_TOKEN}}"}\n'
        "---\n# Who am I\n"
    )
    save_version("whoami", {"TOOL.md": text.encode()}, actor=Actor.system(), publish=True)
    return Tool.objects.get(name="whoami")


def run_of(t: Tool) -> Run:
    run = start.start_run(
        t.published_version, {}, actor=Actor.system(), via=RunVia.BROWSER, enqueue=False
    )
    return run_execute.execute_run(run.pk)


def text_of(run: Run) -> str:
    return run.result["content"][0]["text"]


def test_it_fills_the_access_token_into_the_request_by_its_env_name(
    console_admin_client, oauth_server
) -> None:
    make(oauth_server)
    connect(console_admin_client, oauth_server, "provider")
    access, refresh = tokens("provider")
    run = run_of(tool(oauth_server, "/api/me/"))
    assert run.status == RunStatus.SUCCEEDED, run.result
    assert json.loads(text_of(run)) == {"user": "alice"}
    record = record_of(run)
    assert access not in record and refresh not in record


def test_it_refreshes_once_and_retries_on_a_401(console_admin_client, oauth_server) -> None:
    make(oauth_server)
    connect(console_admin_client, oauth_server, "provider")
    access, refresh = tokens("provider")
    oauth_server.expire(access)  # still unexpired in the console: the API says 401
    before = oauth_server.counts()
    run = run_of(tool(oauth_server, "/api/me/"))
    assert run.status == RunStatus.SUCCEEDED, run.result
    assert json.loads(text_of(run)) == {"user": "alice"}
    after = oauth_server.counts()
    assert after.get("refresh_token", 0) - before.get("refresh_token", 0) == 1
    assert after["/api/me/"] - before.get("/api/me/", 0) == 2  # the 401, then the retry
    new_access, new_refresh = tokens("provider")
    assert new_access != access and new_refresh != refresh
    record = record_of(run)
    assert "refreshed the access token of provider" in record
    for token in (access, refresh, new_access, new_refresh):
        assert token not in record


def test_it_says_reconnect_after_a_second_401(console_admin_client, oauth_server) -> None:
    make(oauth_server)
    connect(console_admin_client, oauth_server, "provider")
    before = oauth_server.counts()
    run = run_of(tool(oauth_server, "/api/always-401/"))
    assert run.status == RunStatus.FAILED
    assert "answered HTTP 401 again with a freshly refreshed token" in text_of(run)
    assert "reconnect integration provider" in text_of(run)
    after = oauth_server.counts()
    assert after.get("refresh_token", 0) - before.get("refresh_token", 0) == 1  # only once
    assert after["/api/always-401/"] - before.get("/api/always-401/", 0) == 2


def test_it_says_reconnect_when_the_refresh_after_a_401_fails(
    console_admin_client, oauth_server
) -> None:
    make(oauth_server)
    connect(console_admin_client, oauth_server, "provider")
    access, refresh = tokens("provider")
    oauth_server.revoke(refresh)  # and with it the access token
    run = run_of(tool(oauth_server, "/api/me/"))
    assert run.status == RunStatus.FAILED
    assert "reconnect integration provider" in text_of(run)
    assert "invalid_grant" in text_of(run)
    assert "Traceback" not in text_of(run)
    conn = OAuthConnection.objects.get(integration__slug="provider")
    assert conn.state == OAuthState.NEEDS_RECONNECT
    record = record_of(run)
    assert access not in record and refresh not in record
