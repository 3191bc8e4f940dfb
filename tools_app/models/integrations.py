from __future__ import annotations

from django.conf import settings
from django.db import models

# Importing the vault registers its system checks (missing/wrong keys) and banner warnings.


class IntegrationQuerySet(models.QuerySet):
    def enabled(self) -> IntegrationQuerySet:
        return self.filter(enabled=True)


class Integration(models.Model):
    """Credentials and settings for one outside service. Plain fields live in `values`;
    secret fields live encrypted in IntegrationSecret rows and are never shown again."""

    slug = models.SlugField(max_length=64, unique=True)
    type_slug = models.CharField(max_length=64)
    label = models.CharField(max_length=200, blank=True)
    enabled = models.BooleanField(default=True)
    # Runs of unpublished versions (drafts) receive this integration's values only when
    # this is on or an admin starts them (tools_app/integrations/policy.py).
    allow_test_runs = models.BooleanField(
        "allow test runs",
        default=False,
        help_text="Runs of draft versions, started by developers, receive these credentials.",
    )
    values = models.JSONField(default=dict, blank=True)
    # Custom integrations carry their own field definitions (same shape as a type's fields).
    custom_fields = models.JSONField(default=list, blank=True)
    # Optimistic concurrency: a form carries the revision it started from.
    revision = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    objects = IntegrationQuerySet.as_manager()

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug


class IntegrationSecret(models.Model):
    """One encrypted secret field (tools_app.integrations.vault). Never registered in Django
    admin, never rendered: pages only say when it was set and by whom."""

    integration = models.ForeignKey(Integration, on_delete=models.CASCADE, related_name="secrets")
    field = models.CharField(max_length=64)
    ciphertext = models.TextField()
    # Fingerprint of the key that encrypted `ciphertext` (vault.key_id): lets checks count
    # secrets no configured key can read, and lets rotation skip finished rows, by query.
    key_id = models.CharField(max_length=16, blank=True, default="", db_index=True)
    set_at = models.DateTimeField()
    set_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["integration", "field"], name="unique_secret_field"),
        ]

    def __str__(self) -> str:
        return f"{self.integration_id}.{self.field}"
