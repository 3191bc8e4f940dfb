"""Connecting an OAuth integration in Chromium: the admin opens the integration, clicks
Connect, logs in at the authorization server (django-oauth-toolkit, tests/oauth_server),
approves on its consent page, and lands back on the integration page, connected."""

from __future__ import annotations

import pytest

from tests.support import oauth as oauth_support
from tests.support.browser import browser_context
from tools_app.models import AuditEvent, OAuthConnection, OAuthState

pytestmark = pytest.mark.browser


@pytest.fixture
def provider(live_server, settings, tmp_path):
    settings.PUBLIC_URL = live_server.url
    redirect_uri = f"{live_server.url}/integrations/oauth/callback/"
    with oauth_support.serve(tmp_path, redirect_uri, consent=True) as server:
        yield server


def test_an_admin_connects_through_the_providers_login_and_consent(
    live_server, console_admin, transactional_db, provider
) -> None:
    from playwright.sync_api import expect

    oauth_support.make(provider)
    with browser_context(live_server, user=console_admin) as context:
        page = context.new_page()
        page.goto("/integrations/provider/")
        expect(page.locator("[data-oauth-state]")).to_have_attribute(
            "data-oauth-state", "not_connected"
        )
        page.get_by_role("button", name="Connect").click()
        # At the provider: its login, then its consent page.
        page.get_by_label("Username").fill("alice")
        page.get_by_label("Password").fill("pw")
        page.get_by_role("button", name="Log in").click()
        page.get_by_role("button", name="Authorize").click()
        # Back on the console's integration page.
        page.wait_for_url(f"{live_server.url}/integrations/provider/")
        expect(page.locator("[data-oauth-state]")).to_have_attribute(
            "data-oauth-state", "connected"
        )
        expect(page.locator(".message.success")).to_contain_text("Connected provider as")
        expect(page.get_by_role("button", name="Reconnect")).to_be_visible()
    conn = OAuthConnection.objects.get(integration__slug="provider")
    assert conn.state == OAuthState.CONNECTED and conn.account
    assert conn.connected_by == console_admin
    env_token = oauth_support.tokens("provider")[0]
    assert provider.echo(env_token).json() == {"user": "alice"}
    assert AuditEvent.objects.filter(action="integration.oauth_connect").exists()
