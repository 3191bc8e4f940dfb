"""Where an OAuth integration's state shows (the integrations list, the System page, the
run form of a tool that uses it, the run page of a run that could not get a token), the
redirect URI beside the client ID field, and the delete page's word on revocation; against
the django-oauth-toolkit server of tests/oauth_server."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from tests.support import oauth as oauth_support
from tests.support.oauth import PUBLIC_URL, REDIRECT_URI, OAuthServer, connect, make, tokens
from tools_app.audit import Actor
from tools_app.integrations import oauth
from tools_app.models import Integration, OAuthConnection, OAuthState
from tools_app.runs import execute as run_execute
from tools_app.runs import start as run_start

oauth_server = oauth_support.oauth_server
pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def public_url(settings) -> None:
    settings.PUBLIC_URL = PUBLIC_URL


def three_states(client, server: OAuthServer) -> None:
    """`good` connected, `broken` needing a reconnect (its refresh token revoked),
    `failing` whose token endpoint answers 404 (a retry may work), `fresh` never connected."""
    for slug in ("good", "broken", "failing", "fresh"):
        make(server, slug)
    connect(client, server, "good")
    # Another account name, or connecting alice again would update `good` instead.
    OAuthConnection.objects.filter(integration__slug="good").update(account="g")
    connect(client, server, "broken", user="bob")
    server.revoke(tokens("broken")[1])
    connect(client, server, "failing")
    failing = Integration.objects.get(slug="failing")
    failing.values = {**failing.values, "token_url": f"{server.url}/nowhere/"}
    failing.save(update_fields=["values"])
    OAuthConnection.objects.exclude(integration__slug="good").update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    for slug in ("broken", "failing"):
        with pytest.raises(oauth.OAuthFailure):
            oauth.refresh(Integration.objects.get(slug=slug))


def state_of(page: str, slug: str, where: str) -> str:
    start = page.index(where.format(slug=slug))
    return page[start:].split('data-oauth-state="', 1)[1].split('"', 1)[0]


def test_it_shows_each_state_on_the_list_and_the_system_page(
    console_admin_client, oauth_server
) -> None:
    three_states(console_admin_client, oauth_server)
    assert OAuthConnection.objects.get(integration__slug="failing").state == (
        OAuthState.REFRESH_FAILING
    )
    listing = console_admin_client.get(reverse("integrations")).content.decode()
    row = 'id="integration-{slug}"'
    assert state_of(listing, "good", row) == "connected"
    assert state_of(listing, "broken", row) == "needs_reconnect"
    assert state_of(listing, "failing", row) == "refresh_failing"
    assert state_of(listing, "fresh", row) == "not_connected"
    assert "HTTP 404" in listing  # the failing refresh's error, in words
    system = console_admin_client.get(reverse("system")).content.decode()
    entry = 'id="oauth-state-{slug}"'
    assert state_of(system, "good", entry) == "connected"
    assert state_of(system, "broken", entry) == "needs_reconnect"
    assert state_of(system, "failing", entry) == "refresh_failing"
    assert state_of(system, "fresh", entry) == "not_connected"
    assert "runs fail until an admin reconnects integration broken" in system
    assert "invalid_grant" in system


def test_it_shows_the_state_on_the_run_form_and_the_failure_on_the_run_page(
    console_admin_client, oauth_server, make_tool
) -> None:
    three_states(console_admin_client, oauth_server)
    tool = make_tool("uses", language="python", integrations=["broken", "good"])
    form = console_admin_client.get(reverse("tool_run", args=["uses"])).content.decode()
    entry = 'id="oauth-state-{slug}"'
    assert state_of(form, "broken", entry) == "needs_reconnect"
    assert state_of(form, "good", entry) == "connected"
    assert "runs fail until an admin reconnects integration broken" in form
    assert 'id="oauth-state-failing"' not in form  # not this tool's
    row = run_start.start_run(
        tool.published_version, {}, actor=Actor.system(), via="api", enqueue=False
    )
    run = run_execute.execute_run(row.pk)
    assert run.status == "failed"
    page = console_admin_client.get(reverse("run", args=[run.pk])).content.decode()
    assert "reconnect integration broken" in page
    assert "Traceback" not in page


def test_it_shows_the_redirect_uri_with_a_copy_button_beside_the_client_id(
    console_admin_client, oauth_server
) -> None:
    make(oauth_server)
    for url in (
        reverse("integration_edit", args=["provider"]),
        reverse("integration_create", args=["generic_oauth2"]),
        reverse("integration_create", args=["google"]),
    ):
        page = console_admin_client.get(url).content.decode()
        client_id = page.index('name="field_client_id"')
        uri = page.index(f'<code id="oauth-redirect-uri">{REDIRECT_URI}</code>')
        assert client_id < uri < page.index('name="secret_client_secret"')
        assert 'data-copy="#oauth-redirect-uri"' in page
    # No browser step, no redirect URI.
    page = console_admin_client.get(
        reverse("integration_create", args=["oauth2_client_credentials"])
    ).content.decode()
    assert "oauth-redirect-uri" not in page


def test_it_says_on_delete_whether_the_provider_revoked_the_tokens(
    console_admin_client, oauth_server
) -> None:
    make(oauth_server, "kept")
    make(oauth_server, "lost")
    connect(console_admin_client, oauth_server, "kept")
    connect(console_admin_client, oauth_server, "lost", user="bob")
    confirm = console_admin_client.get(reverse("integration_delete", args=["kept"]))
    assert "revoked at the provider first" in confirm.content.decode()
    access = tokens("kept")[0]
    page = console_admin_client.post(
        reverse("integration_delete", args=["kept"]), {"confirm": "on"}, follow=True
    ).content.decode()
    assert "Integration kept deleted. Revoked at the provider." in page
    assert oauth_server.echo(access).status_code in (401, 403)
    lost = Integration.objects.get(slug="lost")
    lost.values = {**lost.values, "revocation_url": f"{oauth_server.url}/nowhere/"}
    lost.save(update_fields=["values"])
    page = console_admin_client.post(
        reverse("integration_delete", args=["lost"]), {"confirm": "on"}, follow=True
    ).content.decode()
    assert "Integration lost deleted. Revocation at the provider failed" in page
    assert not Integration.objects.filter(slug__in=["kept", "lost"]).exists()
