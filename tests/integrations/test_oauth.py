"""OAuth2 integrations end to end against a real authorization server (django-oauth-toolkit
in tests/oauth_server, a subprocess on 127.0.0.1): connect through the console's pages,
the access token a run gets, refresh before expiry, one refresh for racing workers,
revoked refresh tokens, a wrong state, a missing PKCE verifier, revocation, no leak."""

from __future__ import annotations

import io
import json
import logging
import threading
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db import connection
from django.test import Client
from django.utils import timezone

from tests.support import oauth as oauth_support
from tests.support.oauth import PUBLIC_URL, connect, make, start, tokens
from tools_app.audit import Actor
from tools_app.integrations import oauth, vault
from tools_app.integrations.environment import environment_for
from tools_app.integrations.rotation import rotate_keys
from tools_app.integrations.service import create_integration
from tools_app.models import AuditEvent, Integration, OAuthConnection, OAuthState

oauth_server = oauth_support.oauth_server


@pytest.fixture(autouse=True)
def public_url(settings) -> None:
    settings.PUBLIC_URL = PUBLIC_URL


@pytest.mark.django_db
def test_it_connects_and_gives_the_run_a_valid_access_token(
    console_admin_client, oauth_server
) -> None:
    make(oauth_server)
    page = connect(console_admin_client, oauth_server, "provider").content.decode()
    assert "Connected provider as" in page
    conn = OAuthConnection.objects.get(integration__slug="provider")
    assert conn.state == OAuthState.CONNECTED
    assert conn.account  # the userinfo's sub
    assert conn.expires_at > timezone.now()
    env, labels = environment_for(["provider"])
    # The tool gets the access token only: no client secret, no refresh token.
    assert list(env) == ["OAUTH2_ACCESS_TOKEN"]
    assert oauth_server.echo(env["OAUTH2_ACCESS_TOKEN"]).json() == {"user": "alice"}
    assert tokens("provider")[1] not in env.values()
    assert list(labels) == ["{{provider.access_token}}"]
    assert AuditEvent.objects.filter(action="integration.oauth_connect").count() == 1


@pytest.mark.django_db
def test_it_refreshes_a_token_due_before_the_next_run(
    console_admin_client, oauth_server, settings
) -> None:
    make(oauth_server)
    connect(console_admin_client, oauth_server, "provider")
    old_access, old_refresh = tokens("provider")
    settings.OAUTH_REFRESH_MARGIN = 3600  # longer than the server's lifetime: due now
    env, _labels = environment_for(["provider"])
    new_access, new_refresh = tokens("provider")
    assert env["OAUTH2_ACCESS_TOKEN"] == new_access != old_access
    assert new_refresh != old_refresh  # the server rotates refresh tokens
    assert oauth_server.echo(new_access).status_code == 200
    assert oauth_server.echo(old_access).status_code in (401, 403)
    settings.OAUTH_REFRESH_MARGIN = 60
    assert environment_for(["provider"])[0]["OAUTH2_ACCESS_TOKEN"] == new_access  # cached


@pytest.mark.django_db(transaction=True)
def test_it_refreshes_once_when_two_workers_race(console_admin_client, oauth_server) -> None:
    make(oauth_server)
    connect(console_admin_client, oauth_server, "provider")
    OAuthConnection.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    before = oauth_server.counts().get("refresh_token", 0)
    integration = Integration.objects.get(slug="provider")
    barrier = threading.Barrier(2)
    got: list[str] = []
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            barrier.wait()
            got.append(oauth.token_for_run(integration)[0])
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    assert oauth_server.counts().get("refresh_token", 0) - before == 1
    assert len(got) == 2 and got[0] == got[1] == tokens("provider")[0]


@pytest.mark.django_db
def test_it_needs_a_reconnect_when_the_refresh_token_is_revoked(
    console_admin_client, oauth_server
) -> None:
    make(oauth_server)
    connect(console_admin_client, oauth_server, "provider")
    oauth_server.revoke(tokens("provider")[1])
    OAuthConnection.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    with pytest.raises(Exception) as caught:
        environment_for(["provider"])
    assert "reconnect integration provider" in str(caught.value)
    assert "invalid_grant" in str(caught.value)
    conn = OAuthConnection.objects.get(integration__slug="provider")
    assert conn.state == OAuthState.NEEDS_RECONNECT
    assert AuditEvent.objects.filter(action="integration.oauth_refresh_failed").exists()
    page = console_admin_client.get("/integrations/provider/").content.decode()
    assert 'data-oauth-state="needs_reconnect"' in page and "Reconnect" in page
    # Reconnecting puts it right, on the same integration.
    page = connect(console_admin_client, oauth_server, "provider").content.decode()
    assert 'data-oauth-state="connected"' in page
    assert AuditEvent.objects.filter(action="integration.oauth_reconnect").exists()


@pytest.mark.django_db
def test_it_refuses_a_wrong_or_reused_state(
    console_admin, console_admin_client, oauth_server
) -> None:
    make(oauth_server)
    back = start(console_admin_client, oauth_server, "provider")
    forged = back.replace("state=", "state=x")
    answer = console_admin_client.get(forged)
    assert answer.status_code == 400
    assert "not started from this session" in answer.content.decode()
    # Only the forged key was looked up: the real state still completes, and only once.
    assert console_admin_client.get(back).status_code == 302
    assert console_admin_client.get(back).status_code == 400
    # Another session (the same admin in a second browser) cannot complete it.
    back = start(console_admin_client, oauth_server, "provider")
    other = Client()
    other.force_login(console_admin)
    assert other.get(back).status_code == 400


@pytest.mark.django_db
def test_it_shows_a_missing_pkce_verifier_refused_by_the_server(
    console_admin_client, oauth_server
) -> None:
    make(oauth_server)
    back = start(console_admin_client, oauth_server, "provider")
    session = console_admin_client.session
    pending = session["oauth_pending"]
    for record in pending.values():
        record["verifier"] = ""
    session["oauth_pending"] = pending
    session.save()
    page = console_admin_client.get(back, follow=True).content.decode()
    assert "provider was not connected" in page
    assert "invalid_request" in page or "invalid_grant" in page
    assert not OAuthConnection.objects.exists()


@pytest.mark.django_db
def test_it_shows_provider_errors_in_words(console_admin_client, oauth_server) -> None:
    make(oauth_server, secret="wrong-secret")
    page = connect(console_admin_client, oauth_server, "provider").content.decode()
    assert "check the client ID and secret (invalid_client)" in page
    back = start(console_admin_client, oauth_server, "provider")
    state = back.split("state=")[1].split("&")[0]
    answer = console_admin_client.get(
        f"/integrations/oauth/callback/?error=access_denied&state={state}", follow=True
    )
    assert "declined the consent (access_denied)" in answer.content.decode()


@pytest.mark.django_db
def test_it_updates_the_integration_already_holding_the_account(
    console_admin_client, oauth_server
) -> None:
    make(oauth_server, "first")
    make(oauth_server, "second")
    connect(console_admin_client, oauth_server, "first")
    page = connect(console_admin_client, oauth_server, "second").content.decode()
    assert "was already connected as first" in page
    assert list(OAuthConnection.objects.values_list("integration__slug", flat=True)) == ["first"]
    connect(console_admin_client, oauth_server, "second", user="bob")
    assert OAuthConnection.objects.count() == 2


@pytest.mark.django_db
def test_it_revokes_at_the_server_on_disconnect_and_delete(
    console_admin_client, oauth_server
) -> None:
    make(oauth_server)
    connect(console_admin_client, oauth_server, "provider")
    access, _refresh = tokens("provider")
    page = console_admin_client.post(
        "/integrations/provider/oauth/disconnect/", follow=True
    ).content.decode()
    assert "Revoked at the provider." in page
    assert oauth_server.echo(access).status_code in (401, 403)
    assert not OAuthConnection.objects.exists()
    assert AuditEvent.objects.filter(action="integration.oauth_revoke").exists()
    connect(console_admin_client, oauth_server, "provider")
    access, _refresh = tokens("provider")
    console_admin_client.post("/integrations/provider/delete/", {"confirm": "on"})
    assert not Integration.objects.filter(slug="provider").exists()
    assert oauth_server.echo(access).status_code in (401, 403)


@pytest.mark.django_db
def test_it_gets_client_credentials_tokens_without_a_browser(
    console_admin_client, oauth_server
) -> None:
    create_integration(
        "machine",
        "oauth2_client_credentials",
        actor=Actor.system(),
        values={
            "client_id": "machine-client",
            "token_url": f"{oauth_server.url}/o/token/",
            "api_url": f"{oauth_server.url}/api/",
        },
        secrets={"client_secret": oauth_server.client_secret},
    )
    page = console_admin_client.post("/integrations/machine/oauth/connect/", follow=True)
    assert "with its client credentials" in page.content.decode()
    env, _labels = environment_for(["machine"])
    assert oauth_server.echo(env["OAUTH2_CC_ACCESS_TOKEN"]).status_code == 200


@pytest.mark.django_db
def test_it_tells_a_run_to_reconnect_when_never_connected(oauth_server) -> None:
    make(oauth_server)
    with pytest.raises(Exception, match="reconnect integration provider"):
        environment_for(["provider"])


@pytest.mark.django_db
def test_it_rotates_the_tokens_with_the_encryption_keys(
    console_admin_client, oauth_server, settings
) -> None:
    from cryptography.fernet import Fernet

    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    settings.CONSOLE_ENCRYPTION_KEYS = [old]
    vault.clear_cache()
    make(oauth_server)
    connect(console_admin_client, oauth_server, "provider")
    before = tokens("provider")
    settings.CONSOLE_ENCRYPTION_KEYS = [new, old]
    vault.clear_cache()
    assert rotate_keys().oauth == 1
    settings.CONSOLE_ENCRYPTION_KEYS = [new]
    vault.clear_cache()
    assert tokens("provider") == before
    assert OAuthConnection.objects.get().key_id == vault.primary_key_id()


@pytest.mark.django_db
def test_it_never_shows_either_token(
    caplog, console_admin_client, viewer_client, oauth_server, settings
) -> None:
    caplog.set_level(logging.DEBUG)
    make(oauth_server)
    connect(console_admin_client, oauth_server, "provider")
    settings.OAUTH_REFRESH_MARGIN = 3600
    environment_for(["provider"])  # a refresh too
    access, refresh = tokens("provider")
    pages = [
        "/integrations/",
        "/integrations/provider/",
        "/integrations/provider/edit/",
        "/integrations/environment/",
        "/system/",
        "/audit/",
        "/admin/",
        "/api/v1/integrations/",
    ]
    seen = []
    for client in (console_admin_client, viewer_client):
        for path in pages:
            seen.append(client.get(path).content.decode(errors="replace"))
    out = io.StringIO()
    call_command("dumpdata", stdout=out)
    seen.append(out.getvalue())
    seen.append(json.dumps(list(AuditEvent.objects.values()), default=str))
    seen.append(caplog.text)
    data = list(settings.DATA_PATH.rglob("*")) if settings.DATA_PATH.exists() else []
    seen += [p.read_text(errors="replace") for p in data if p.is_file()]
    for text in seen:
        assert access not in text and refresh not in text
