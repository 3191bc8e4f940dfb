"""A code tool using an OAuth integration, run for real (run_execute.execute_run, the runner in
bubblewrap behind the egress policy) against the django-oauth-toolkit server of
tests/oauth_server: the tool gets a valid access token and never the refresh token, and
once the token is due the next run gets a refreshed one."""

from __future__ import annotations

import hashlib
import json
import textwrap
from datetime import timedelta

import pytest
from django.utils import timezone

from tests.support import oauth as oauth_support
from tests.support import require
from tests.support.oauth import PUBLIC_URL, OAuthServer, connect, make, record_of, tokens
from tools_app.audit import Actor
from tools_app.models import OAuthConnection, Run, Tool
from tools_app.runner import isolation_level
from tools_app.runs import execute as run_execute
from tools_app.runs import start

oauth_server = oauth_support.oauth_server
pytestmark = pytest.mark.django_db(transaction=True)

# Calls the provider's API with the token it was given, and reports what it saw: the
# API's answer, the token's SHA-256 (the record redacts the token itself) and its whole
# environment (where a leaked refresh token would show, unredacted).
WHOAMI_PY = textwrap.dedent(
    """
    import hashlib, json, os, urllib.request

    def execute(tool_call_id, params, signal, on_update):
        token = os.environ.get("OAUTH2_ACCESS_TOKEN", "")
        request = urllib.request.Request(
            params["url"], headers={"Authorization": "Bearer " + token}
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as answer:
                echo = json.loads(answer.read())
        except Exception as exc:
            echo = repr(exc)
        seen = {
            "echo": echo,
            "sha256": hashlib.sha256(token.encode()).hexdigest(),
            "env": dict(os.environ),
        }
        return {"content": [{"type": "text", "text": json.dumps(seen)}]}
    """
)


@pytest.fixture(autouse=True)
def console(settings) -> None:
    require(isolation_level()[0] != "bwrap", "a sandboxed run needs bubblewrap")
    settings.PUBLIC_URL = PUBLIC_URL


def whoami(make_tool) -> Tool:
    return make_tool(
        "whoami",
        language="python",
        source=WHOAMI_PY,
        inputs={"url": {"type": "string", "description": "The API to call"}},
        integrations=["provider"],
        extra={"network": True},
    )


def run_of(t: Tool, server: OAuthServer) -> tuple[Run, dict]:
    row = start.start_run(
        t.published_version,
        {"url": f"{server.url}/api/echo/"},
        actor=Actor.system(),
        via="api",
        enqueue=False,
    )
    done = run_execute.execute_run(row.pk)
    return done, json.loads(done.result["content"][0]["text"])


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def test_it_gives_the_sandboxed_tool_a_valid_access_token_and_never_the_refresh_token(
    console_admin_client, oauth_server, make_tool
) -> None:
    make(oauth_server)
    connect(console_admin_client, oauth_server, "provider")
    access, refresh = tokens("provider")
    run, seen = run_of(whoami(make_tool), oauth_server)
    assert run.status == "succeeded", run.result
    assert run.isolation == "bwrap"
    assert seen["echo"] == {"user": "alice"}  # DOT accepted the token the tool got
    assert seen["sha256"] == sha256(access)
    assert seen["env"]["OAUTH2_ACCESS_TOKEN"] == "{{provider.access_token}}"  # redacted
    everything = json.dumps(seen["env"])
    assert refresh not in everything and oauth_server.client_secret not in everything
    assert not any("REFRESH" in name or "CLIENT_SECRET" in name for name in seen["env"])
    record = record_of(run)
    assert access not in record and refresh not in record
    assert oauth_server.client_secret not in record


def test_it_refreshes_an_expired_token_before_the_next_run(
    console_admin_client, oauth_server, make_tool
) -> None:
    make(oauth_server)
    connect(console_admin_client, oauth_server, "provider")
    tool = whoami(make_tool)
    old_access, old_refresh = tokens("provider")
    run, seen = run_of(tool, oauth_server)
    assert seen["sha256"] == sha256(old_access)
    OAuthConnection.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    before = oauth_server.counts().get("refresh_token", 0)
    run, seen = run_of(tool, oauth_server)
    assert run.status == "succeeded", run.result
    new_access, new_refresh = tokens("provider")
    assert new_access != old_access and new_refresh != old_refresh
    assert oauth_server.counts().get("refresh_token", 0) - before == 1
    assert seen["sha256"] == sha256(new_access)
    assert seen["echo"] == {"user": "alice"}
    assert oauth_server.echo(old_access).status_code in (401, 403)  # rotated away
    record = record_of(run)
    for token in (old_access, old_refresh, new_access, new_refresh):
        assert token not in record
    assert OAuthConnection.objects.get().expires_at > timezone.now()
