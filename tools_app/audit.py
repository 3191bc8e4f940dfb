"""One function writes audit events, whoever acts: a person, an agent token or the system."""

from __future__ import annotations

from typing import Any

from django.db import models

from tools_app.models import AgentToken, AuditEvent


class Actor:
    """Who is acting. Built from a request, a token or nothing (the system)."""

    def __init__(self, user=None, token: AgentToken | None = None, ip: str | None = None) -> None:
        self.user = user if user is not None and user.is_authenticated else None
        self.token = token
        self.ip = ip

    @classmethod
    def system(cls) -> Actor:
        return cls()

    @classmethod
    def from_request(cls, request, token: AgentToken | None = None) -> Actor:
        return cls(user=getattr(request, "user", None), token=token, ip=client_ip(request))

    @property
    def kind(self) -> str:
        if self.user is not None:
            return AuditEvent.ActorKind.USER
        if self.token is not None:
            return AuditEvent.ActorKind.TOKEN
        return AuditEvent.ActorKind.SYSTEM

    @property
    def label(self) -> str:
        if self.user is not None:
            return self.user.get_username()
        if self.token is not None:
            return f"token:{self.token.name}"
        return "system"


def client_ip(request) -> str | None:
    # REMOTE_ADDR only: X-Forwarded-For is trivially forged unless a trusted proxy sets it.
    return request.META.get("REMOTE_ADDR") or None


def record(
    actor: Actor,
    action: str,
    target: models.Model | None = None,
    summary: str = "",
    data: dict[str, Any] | None = None,
) -> AuditEvent:
    """Write one audit event. `summary` and `data` must never hold secret values."""
    return AuditEvent.objects.create(
        actor_kind=actor.kind,
        actor_user=actor.user,
        actor_token=actor.token,
        actor=actor.label,
        action=action,
        target_type=target._meta.model_name if target is not None else "",
        target_id=str(target.pk) if target is not None else "",
        target=str(target)[:200] if target is not None else "",
        summary=summary,
        data=data or {},
        ip=actor.ip,
    )
