from __future__ import annotations

from django.conf import settings
from django.db import models

from tools_app.models.integrations import Integration


class OAuthState(models.TextChoices):
    CONNECTED = "connected", "Connected"
    EXPIRING = "expiring", "Expiring"  # no refresh token, or the provider ends it soon
    REFRESH_FAILING = "refresh_failing", "Refresh failing"  # a retry may work
    NEEDS_RECONNECT = "needs_reconnect", "Needs reconnect"  # only an admin can fix it


class OAuthConnectionQuerySet(models.QuerySet):
    def refreshable(self) -> OAuthConnectionQuerySet:
        """Those the beat task keeps fresh: an admin has not yet to step in."""
        return self.exclude(state=OAuthState.NEEDS_RECONNECT).filter(integration__enabled=True)


class OAuthConnection(models.Model):
    """The tokens of one OAuth2 integration (tools_app/integrations/oauth.py), sealed by the
    vault like every secret under one key (`key_id`), never rendered: pages and Django admin
    show the state, the account and the times only."""

    integration = models.OneToOneField(
        Integration, on_delete=models.CASCADE, related_name="oauth_connection"
    )
    state = models.CharField(
        max_length=20, choices=OAuthState.choices, default=OAuthState.CONNECTED
    )
    # The provider's words when a refresh failed (error and description), for the pages.
    error = models.TextField(blank=True, default="")
    access_ciphertext = models.TextField()
    refresh_ciphertext = models.TextField(blank=True, default="")  # "" when none was issued
    key_id = models.CharField(max_length=16, blank=True, default="", db_index=True)
    expires_at = models.DateTimeField(null=True, blank=True)  # None: the provider gave none
    account = models.CharField(max_length=320, blank=True, default="")
    scope = models.TextField(blank=True, default="")
    connected_at = models.DateTimeField()
    connected_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    refreshed_at = models.DateTimeField(null=True, blank=True)

    objects = OAuthConnectionQuerySet.as_manager()

    def __str__(self) -> str:
        return f"{self.integration_id} ({self.state})"
