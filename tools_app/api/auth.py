"""Bearer-token authentication for agents, one scope per router."""

from __future__ import annotations

import logging
import time
from datetime import timedelta

from django.conf import settings
from django.db import DatabaseError, transaction
from django.http import HttpRequest
from django.utils import timezone
from ninja.security import HttpBearer

from tools_app.api.errors import Forbidden, Unauthorized
from tools_app.models import AgentToken
from tools_app.models.tokens import TOKEN_PREFIX, hash_token

logger = logging.getLogger("tools_app.api")

# last_used_at is informative; writing it on every request would turn each read into a
# write (and serialise SQLite writers), so it moves at most once a minute per token.
LAST_USED_RESOLUTION = timedelta(minutes=1)
# A valid token is remembered in this process for this many seconds, so a busy agent costs
# no query per request (an ORM query is most of a 304's cost, and a shared cache would
# still cost a round trip). Revoking or deleting a token forgets it at once in the process
# that does it; other processes refuse it within this many seconds.
# settings.CONSOLE_API_AUTH_CACHE_SECONDS overrides it; 0 turns the memo off.
AUTH_CACHE_SECONDS = 1.0
# Only valid tokens are remembered, so this only bounds memory if there are very many.
MAX_REMEMBERED = 10_000

# token hash -> (expiry on the monotonic clock, token)
_remembered: dict[str, tuple[float, AgentToken]] = {}


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
        agent = active_token(token)
        if agent is None:
            raise Unauthorized("invalid token", "the token is unknown, was revoked or has expired")
        if not agent.has_scope(self.scope):
            raise Forbidden(
                "missing scope", f"this token lacks the '{self.scope}' scope", scope=self.scope
            )
        touch(agent)
        return agent


def active_token(raw: str) -> AgentToken | None:
    """The active token `raw`, remembered for a moment once seen. Misses are not
    remembered: a token created a moment ago must work at once."""
    if not raw.startswith(TOKEN_PREFIX) or len(raw) > 200:
        return None  # not one of ours: no hashing, no query
    token_hash = hash_token(raw)
    now = time.monotonic()
    entry = _remembered.get(token_hash)
    # A remembered token that expired meanwhile is looked up again (and refused).
    if entry is not None and entry[0] > now and not entry[1].is_expired:
        return entry[1]
    agent = AgentToken.authenticate(raw)
    if agent is None:
        _remembered.pop(token_hash, None)
        return None
    ttl = float(getattr(settings, "CONSOLE_API_AUTH_CACHE_SECONDS", AUTH_CACHE_SECONDS))
    if ttl > 0:
        if len(_remembered) >= MAX_REMEMBERED:
            _remembered.clear()
        _remembered[token_hash] = (now + ttl, agent)
    return agent


def touch(token: AgentToken) -> None:
    """Record the use, at most once a minute (on the remembered instance too, so the
    next requests do not write again)."""
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at >= LAST_USED_RESOLUTION:
        token.last_used_at = now
        try:
            AgentToken.objects.filter(pk=token.pk).update(last_used_at=now)
        except DatabaseError:
            # Informative only: a busy or read-only database must not fail the request.
            logger.warning("could not record the use of token %s", token.pk, exc_info=True)


def forget_token(token: AgentToken) -> None:
    """After a token is saved or deleted (tools_app/signals.py)."""
    _remembered.pop(token.token_hash, None)
    # Again after the commit, in case a request remembered it between save and commit.
    transaction.on_commit(lambda: _remembered.pop(token.token_hash, None))


def forget_all() -> None:
    _remembered.clear()
