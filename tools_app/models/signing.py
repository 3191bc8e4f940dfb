"""The signing key ring (tools_app/signing/keyring.py, docs/signing.md): Ed25519 keys and
the keys.json documents the root key signed. Private keys are sealed by the vault
(tools_app.integrations.vault), never stored, logged or dumped in the clear."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class KeyRole(models.TextChoices):
    # Signs keys.json only; may live offline (private_key_sealed blank).
    ROOT = "root"
    # Signs versions' manifests.
    SIGNING = "signing"


class SigningKey(models.Model):
    key_id = models.CharField(max_length=16, unique=True)
    role = models.CharField(max_length=8, choices=KeyRole.choices)
    # base64 of the raw 32 bytes.
    public_key = models.CharField(max_length=64)
    # vault.encrypt() of the base64 raw private key; blank once the root went offline.
    private_key_sealed = models.TextField(blank=True, default="")
    # The vault key that sealed it (vault.key_id), for rotate_encryption_keys.
    sealed_key_id = models.CharField(max_length=16, blank=True, default="")
    created_at = models.DateTimeField()
    retired_at = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["created_at", "pk"]

    def __str__(self) -> str:
        return f"{self.role} {self.key_id}"

    @property
    def online(self) -> bool:
        return bool(self.private_key_sealed)


class KeysDocument(models.Model):
    """One keys.json envelope; the one with the highest serial is served."""

    serial = models.PositiveIntegerField(unique=True)
    envelope = models.JSONField()
    issued_at = models.DateTimeField()
    expires_at = models.DateTimeField()

    class Meta:
        ordering = ["-serial"]

    def __str__(self) -> str:
        return f"keys.json #{self.serial}"
