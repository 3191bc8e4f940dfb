"""Agent token pages (admins only) and the create_agent_token command."""

from __future__ import annotations

import io
import re
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from django.utils import timezone

from tests.support import console_env, manage
from tests.support.forms import find_form, link, submit
from tools_app.models import AgentToken, AuditEvent
from tools_app.models.tokens import hash_token

TOKEN_RE = re.compile(r"tc_[A-Za-z0-9_-]{43}")
REGISTRY = "/api/v1/registry"


def create(client: Client, name: str = "builder", scopes=("registry:read",)):
    """Fill in the rendered "Create an agent token" form and press its button."""
    changes = {"name": name, "scopes": list(scopes)}
    return submit(client, "/tokens/new/", changes, button="Create token", follow=True)


def raw_token_in(response) -> str:
    (raw,) = set(TOKEN_RE.findall(response.content.decode()))
    return raw


# --- who may see the pages ---------------------------------------------------------------


@pytest.mark.parametrize("url", ["/tokens/", "/tokens/new/", "/tokens/1/revoke/"])
def test_it_sends_anonymous_visitors_to_the_login_page(db, url):
    response = Client().get(url)
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


@pytest.mark.parametrize("role_client", ["viewer_client", "developer_client"])
def test_it_refuses_viewers_and_developers(request, console_admin, role_client):
    client = request.getfixturevalue(role_client)
    token, _ = AgentToken.issue("existing", ["registry:read"], created_by=console_admin)
    assert client.get("/tokens/").status_code == 403
    assert client.get("/tokens/new/").status_code == 403
    assert client.post("/tokens/new/", {"name": "x", "scopes": ["sync:read"]}).status_code == 403
    assert client.post(f"/tokens/{token.pk}/revoke/").status_code == 403
    assert AgentToken.objects.count() == 1
    token.refresh_from_db()
    assert token.is_active


def test_it_lists_tokens_for_admins(console_admin_client, console_admin):
    AgentToken.issue("alpha", ["registry:read", "sync:read"], created_by=console_admin)
    revoked, _ = AgentToken.issue("beta", ["tools:invoke"])
    revoked.revoke()
    response = console_admin_client.get("/tokens/")
    assert response.status_code == 200
    html = response.content.decode()
    for text in ("alpha", "beta", "registry:read", "sync:read", "tools:invoke", "revoked", "ada"):
        assert text in html
    assert "never" in html  # last used
    assert AgentToken.objects.get(name="alpha").prefix in html


# --- create ------------------------------------------------------------------------------


def test_it_shows_a_new_token_exactly_once(console_admin_client, console_admin):
    assert console_admin_client.get("/tokens/new/").status_code == 200
    response = create(console_admin_client, "builder", ["registry:read", "sync:read"])
    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]
    raw = raw_token_in(response)

    token = AgentToken.objects.get()
    assert token.name == "builder"
    assert token.scopes == ["registry:read", "sync:read"]
    assert token.created_by == console_admin
    assert token.token_hash == hash_token(raw)
    assert raw.startswith(token.prefix)
    # Only the hash is stored, and no later page shows the token again.
    assert raw not in str(AgentToken.objects.values().get())
    assert raw not in console_admin_client.get("/tokens/").content.decode()
    assert raw not in console_admin_client.get(f"/tokens/{token.pk}/revoke/").content.decode()

    event = AuditEvent.objects.get(action="token.create")
    assert event.actor_user == console_admin
    assert event.target_id == str(token.pk)
    assert raw not in f"{event.summary} {event.data}"

    # A reload shows the empty form: no second token, and the token is not shown again.
    again = console_admin_client.get("/tokens/new/")
    assert again.status_code == 200 and raw not in again.content.decode()
    assert "Create token" in again.content.decode()
    assert AgentToken.objects.count() == 1
    assert "tokens.created" not in console_admin_client.session

    # The token works at once.
    api = Client(headers={"Authorization": f"Bearer {raw}"})
    assert api.get(REGISTRY).status_code == 200


@pytest.mark.parametrize(
    "data, field",
    [
        ({"name": "x"}, "scopes"),
        ({"name": "x", "scopes": ["root:all"]}, "scopes"),
        ({"name": "", "scopes": ["sync:read"]}, "name"),
        ({"name": "   ", "scopes": ["sync:read"]}, "name"),
        ({"name": "a" * 101, "scopes": ["sync:read"]}, "name"),
        ({"name": "bad\x00name", "scopes": ["sync:read"]}, "name"),
        ({"name": "two\nlines", "scopes": ["sync:read"]}, "name"),
    ],
)
def test_it_rejects_a_bad_form_without_creating_a_token(console_admin_client, data, field):
    response = submit(console_admin_client, "/tokens/new/", {"scopes": None, **data},
                      button="Create token")  # fmt: skip
    assert response.status_code == 200
    assert response.context["form"].errors[field]
    assert not AgentToken.objects.exists()
    assert not TOKEN_RE.search(response.content.decode())


def test_it_refuses_other_methods(console_admin_client):
    assert console_admin_client.put("/tokens/new/").status_code == 405
    assert console_admin_client.post("/tokens/").status_code == 405


# --- revoke ------------------------------------------------------------------------------


def test_it_revokes_a_token_after_confirmation(console_admin_client, console_admin):
    raw = raw_token_in(create(console_admin_client))
    token = AgentToken.objects.get()
    api = Client(headers={"Authorization": f"Bearer {raw}"})
    assert api.get(REGISTRY).status_code == 200

    listed = console_admin_client.get("/tokens/").content.decode()
    confirm = console_admin_client.get(link(listed, "Revoke…"))
    assert confirm.status_code == 200
    stale = find_form(confirm.content.decode(), button="Revoke token")
    assert "Revoke token" in confirm.content.decode()
    token.refresh_from_db()
    assert token.is_active  # a GET changes nothing

    response = submit(console_admin_client, f"/tokens/{token.pk}/revoke/", button="Revoke token",
                      follow=True)  # fmt: skip
    assert response.redirect_chain == [("/tokens/", 302)]
    assert "is revoked" in response.content.decode()
    token.refresh_from_db()
    assert token.revoked_at is not None
    assert api.get(REGISTRY).status_code == 401

    # Revoking twice (the confirm page, still open in another tab) is harmless, audited once.
    assert console_admin_client.post(stale.attrs["action"], stale.data()).status_code == 302
    events = AuditEvent.objects.filter(action="token.revoke")
    assert events.count() == 1
    assert events.get().actor_user == console_admin


def test_it_answers_404_for_an_unknown_token(console_admin_client):
    assert console_admin_client.get("/tokens/999/revoke/").status_code == 404
    assert console_admin_client.post("/tokens/999/revoke/").status_code == 404


def test_it_shows_when_a_token_was_last_used(console_admin_client):
    raw = raw_token_in(create(console_admin_client))
    Client(headers={"Authorization": f"Bearer {raw}"}).get(REGISTRY)
    token = AgentToken.objects.get()
    assert token.last_used_at is not None
    html = console_admin_client.get("/tokens/").content.decode()
    assert f"{token.last_used_at:%Y-%m-%d %H:%M}" in html


# --- the command -------------------------------------------------------------------------


def test_it_creates_a_token_from_the_command_line(db):
    out, err = io.StringIO(), io.StringIO()
    call_command(
        "create_agent_token", "ci", "--scope", "registry:read", "sync:read", stdout=out, stderr=err
    )
    raw = out.getvalue().strip()
    assert TOKEN_RE.fullmatch(raw)
    assert raw not in err.getvalue()
    token = AgentToken.objects.get()
    assert token.scopes == ["registry:read", "sync:read"]
    assert token.token_hash == hash_token(raw)
    assert AuditEvent.objects.get(action="token.create").actor == "system"
    response = Client(headers={"Authorization": f"Bearer {raw}"}).get("/api/v1/sync/manifest")
    assert response.status_code == 200


def test_it_refuses_an_unknown_scope_with_status_2(db):
    with pytest.raises(CommandError) as caught:
        call_command("create_agent_token", "ci", "--scope", "registry:read", "root:all")
    assert caught.value.returncode == 2
    assert "root:all" in str(caught.value)
    assert not AgentToken.objects.exists()


@pytest.mark.parametrize(
    "args",
    [["ci", "--scope", "nope"], ["ci"], ["--scope", "sync:read"], ["", "--scope", "sync:read"]],
)
def test_it_exits_2_on_bad_usage(tmp_path, args):
    result = manage("create_agent_token", *args, env=console_env(tmp_path), timeout=60)
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""


def test_it_answers_the_create_post_with_a_redirect(console_admin_client):
    """POST-redirect-GET: a reload of the page that shows the token is a GET, so it can
    never post the form again and make a second token with the same name."""
    response = submit(
        console_admin_client,
        "/tokens/new/",
        {"name": "builder", "scopes": ["registry:read"]},
        button="Create token",
    )
    assert response.status_code == 302 and response["Location"] == "/tokens/new/"
    assert not TOKEN_RE.findall(response.content.decode())
    shown = console_admin_client.get("/tokens/new/")
    assert len(set(TOKEN_RE.findall(shown.content.decode()))) == 1
    assert not TOKEN_RE.findall(console_admin_client.get("/tokens/new/").content.decode())
    assert AgentToken.objects.count() == 1


def test_a_new_token_expires_in_90_days_unless_chosen_otherwise(console_admin_client):
    before = timezone.now()
    create(console_admin_client, "default", ["registry:read"])
    default = AgentToken.objects.get(name="default")
    assert before + timedelta(days=90) <= default.expires_at <= timezone.now() + timedelta(days=90)

    console_admin_client.post(
        "/tokens/new/", {"name": "forever", "scopes": ["registry:read"], "expires": ""}
    )
    assert AgentToken.objects.get(name="forever").expires_at is None
    bad = console_admin_client.post(
        "/tokens/new/", {"name": "odd", "scopes": ["registry:read"], "expires": "-3"}
    )
    assert bad.status_code == 200 and "Select a valid choice" in bad.content.decode()
    assert not AgentToken.objects.filter(name="odd").exists()


def test_an_expired_token_is_refused_even_if_it_was_remembered(db):
    """The API remembers a token for a moment; one that expires meanwhile is refused at
    once, not when the memory lapses."""
    from tests.support.agent_api import reset_api_caches

    reset_api_caches()
    token, raw = AgentToken.issue(
        "soon", ["registry:read"], expires_at=timezone.now() + timedelta(hours=1)
    )
    api = Client(headers={"Authorization": f"Bearer {raw}"})
    assert api.get(REGISTRY).status_code == 200  # remembered from here on

    AgentToken.objects.filter(pk=token.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    token.refresh_from_db()
    from tools_app.api import auth

    remembered = auth._remembered[hash_token(raw)][1]
    remembered.expires_at = token.expires_at  # the instance the memory holds, as after a reload
    refused = api.get(REGISTRY)

    assert refused.status_code == 401
    assert "has expired" in refused.json()["detail"]
    assert not AgentToken.objects.active().filter(pk=token.pk).exists()


def test_the_list_says_when_each_token_expires(console_admin_client):
    AgentToken.issue("later", ["registry:read"], expires_at=timezone.now() + timedelta(days=3))
    AgentToken.issue("gone", ["registry:read"], expires_at=timezone.now() - timedelta(days=1))
    AgentToken.issue("always", ["registry:read"])

    page = console_admin_client.get("/tokens/").content.decode()

    assert page.count("expires <time") == 1
    assert '<span class="badge disabled">expired</span>' in page
    assert "never expires" in page


def test_a_new_token_page_shows_the_mcp_client_configuration(console_admin_client):
    response = create(console_admin_client, "desktop", ["registry:read", "tools:invoke"])
    raw = raw_token_in(response)
    page = response.content.decode()

    assert "http://testserver/mcp" in page
    command = "claude mcp add --transport http tool-console http://testserver/mcp"
    assert f'{command} --header "Authorization: Bearer {raw}"' in page
    assert '"url": "http://testserver/mcp"' in page
    # A token that cannot list and call tools gets no MCP setup.
    sync_only = create(console_admin_client, "mirror", ["sync:read"]).content.decode()
    assert "Connect an MCP client" not in sync_only


def test_the_command_line_token_can_expire(db):
    out, err = io.StringIO(), io.StringIO()
    call_command("create_agent_token", "cli", "--scope", "registry:read", "--expires-in", "7",
                 stdout=out, stderr=err)  # fmt: skip
    token = AgentToken.objects.get(name="cli")
    assert timedelta(days=6) < token.expires_at - timezone.now() <= timedelta(days=7)
