from __future__ import annotations

from django.conf import settings
from django.db import models


class AppendOnlyError(Exception):
    pass


class AuditEventQuerySet(models.QuerySet):
    def update(self, **kwargs):  # type: ignore[override]
        raise AppendOnlyError("audit events are append-only")

    def delete(self):  # type: ignore[override]
        raise AppendOnlyError("audit events are append-only")


class AuditEvent(models.Model):
    """Who did what, when, from where. Append-only: never updated, never deleted."""

    class ActorKind(models.TextChoices):
        USER = "user"
        TOKEN = "token"
        SYSTEM = "system"

    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    actor_kind = models.CharField(max_length=10, choices=ActorKind.choices)
    actor_user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    actor_token = models.ForeignKey(
        "tools_app.AgentToken", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # The actor's name at the time, kept even if the user or token is deleted later.
    actor = models.CharField(max_length=200)
    action = models.CharField(max_length=64, db_index=True)
    target_type = models.CharField(max_length=64, blank=True)
    target_id = models.CharField(max_length=64, blank=True)
    target = models.CharField(max_length=200, blank=True)
    summary = models.TextField(blank=True)
    data = models.JSONField(default=dict, blank=True)
    ip = models.GenericIPAddressField(null=True, blank=True)

    objects = AuditEventQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["target_type", "target_id"])]

    def __str__(self) -> str:
        return f"{self.created_at:%Y-%m-%d %H:%M:%S} {self.actor} {self.action} {self.target}"

    def save(self, *args, **kwargs) -> None:
        if self.pk is not None:
            raise AppendOnlyError("audit events are append-only")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):  # type: ignore[override]
        raise AppendOnlyError("audit events are append-only")
