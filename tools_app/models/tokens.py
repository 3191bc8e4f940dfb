from __future__ import annotations

import hashlib
import secrets

from django.conf import settings
from django.db import models
from django.utils import timezone

TOKEN_PREFIX = "tc_"


class Scope(models.TextChoices):
    REGISTRY_READ = "registry:read"
    SYNC_READ = "sync:read"
    TOOLS_INVOKE = "tools:invoke"
    SECRETS_READ = "secrets:read"
    METRICS_READ = "metrics:read"


def hash_token(raw: str) -> str:
    # Tokens are 256 random bits, so a plain SHA-256 is enough (no password stretching needed).
    return hashlib.sha256(raw.encode()).hexdigest()


class AgentTokenQuerySet(models.QuerySet):
    def active(self) -> AgentTokenQuerySet:
        """Not revoked and not expired."""
        return self.filter(revoked_at__isnull=True).filter(
            models.Q(expires_at__isnull=True) | models.Q(expires_at__gt=timezone.now())
        )


class AgentToken(models.Model):
    """A bearer token for agents. Only its hash is stored; the token is shown once."""

    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16, help_text="First characters, to recognise a token.")
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    scopes = models.JSONField(default=list)
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    # None: never expires. Past it the token is refused like a revoked one.
    expires_at = models.DateTimeField(null=True, blank=True)
    # Tool name -> approved manifest digest (docs/signing.md, pins); empty: not pinned.
    pins = models.JSONField(default=dict, blank=True)

    objects = AgentTokenQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @classmethod
    def issue(
        cls, name: str, scopes: list[str], created_by=None, expires_at=None
    ) -> tuple[AgentToken, str]:
        raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
        token = cls.objects.create(
            name=name,
            prefix=raw[:10],
            token_hash=hash_token(raw),
            scopes=sorted(set(scopes)),
            created_by=created_by,
            expires_at=expires_at,
        )
        return token, raw

    @classmethod
    def authenticate(cls, raw: str) -> AgentToken | None:
        if not raw.startswith(TOKEN_PREFIX) or len(raw) > 200:
            return None
        return cls.objects.active().filter(token_hash=hash_token(raw)).first()

    @property
    def is_expired(self) -> bool:
        return self.expires_at is not None and self.expires_at <= timezone.now()

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None and not self.is_expired

    def has_scope(self, scope: str) -> bool:
        return scope in self.scopes

    def revoke(self) -> None:
        self.revoked_at = timezone.now()
        self.save(update_fields=["revoked_at"])
