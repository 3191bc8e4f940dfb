"""Bearer-token authentication for agents, one scope per router."""

from __future__ import annotations

from datetime import timedelta

from django.http import HttpRequest
from django.utils import timezone
from ninja.security import HttpBearer

from tools_app.api.errors import Forbidden, Unauthorized
from tools_app.models import AgentToken

# last_used_at is informative; writing it on every request would turn each read into a
# write (and serialise SQLite writers), so it moves at most once a minute per token.
LAST_USED_RESOLUTION = timedelta(minutes=1)


class TokenAuth(HttpBearer):
    """`Authorization: Bearer <agent token>` holding `scope`; request.auth is the token."""

    def __init__(self, scope: str) -> None:
        self.scope = str(scope)
        super().__init__()

    def __call__(self, request: HttpRequest) -> AgentToken:
        header = request.headers.get("Authorization", "")
        if not header:
            raise Unauthorized("missing token", "send 'Authorization: Bearer <agent token>'")
        scheme, _, raw = header.strip().partition(" ")
        if scheme.lower() != "bearer" or not raw.strip():
            raise Unauthorized("malformed Authorization header", "expected 'Bearer <token>'")
        return self.authenticate(request, raw.strip())

    def authenticate(self, request: HttpRequest, token: str) -> AgentToken:
        agent = AgentToken.authenticate(token)
        if agent is None:
            raise Unauthorized("invalid token", "the token is unknown or was revoked")
        if not agent.has_scope(self.scope):
            raise Forbidden(
                "missing scope", f"this token lacks the {self.scope!r} scope", scope=self.scope
            )
        touch(agent)
        return agent


def touch(token: AgentToken) -> None:
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at >= LAST_USED_RESOLUTION:
        AgentToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
