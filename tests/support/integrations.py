"""Helpers for the integration tests: a local HTTP server standing in for provider APIs,
Fernet keys, and a shortcut to create integrations through the domain functions."""

from __future__ import annotations

import io
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
from cryptography.fernet import Fernet

from tests.support.stand_in import Reply, Request, json_reply
from tools_app.audit import Actor
from tools_app.integrations import vault
from tools_app.integrations.service import create_integration
from tools_app.models import Integration


class StdinText(io.StringIO):
    """Standard input for a command: text, not a terminal."""

    def isatty(self) -> bool:
        return False


def new_key() -> str:
    return Fernet.generate_key().decode()


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]  # names in lower case
    body: bytes


@dataclass
class Provider:
    """What the fake provider answers. `handler` may replace the whole answer: it returns
    a Reply, or None to answer as configured."""

    url: str = ""
    status: int = 200
    body: bytes = b'{"results": []}'
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    # Echo the Authorization header back in the body (providers do echo bad keys).
    echo_authorization: bool = False
    handler: Callable[[Request], Reply | None] | None = None
    seen: list[Seen] = field(default_factory=list)

    @property
    def last(self) -> Seen:
        return self.seen[-1]

    def answer(self, request: Request) -> Reply:
        headers = {k.lower(): v for k, v in request.headers.items()}
        self.seen.append(Seen(request.method, request.path, headers, request.body))
        if self.handler is not None and (reply := self.handler(request)) is not None:
            return reply
        if self.delay:
            time.sleep(self.delay)
        payload = self.body
        if self.echo_authorization:
            payload = json.dumps(
                {"error": "invalid credentials", "got": request.header("Authorization")}
            ).encode()
        return Reply(self.status, payload, self.content_type, dict(self.headers))


def send_json(request: Request, data: object) -> Reply:
    """Answer 200 with `data` as JSON, from a Provider.handler."""
    return json_reply(data)


@pytest.fixture
def fake_provider(stand_in) -> Provider:
    state = Provider()
    state.url = stand_in(state.answer).url
    return state


@pytest.fixture(autouse=True)
def fast_passwords(settings) -> None:
    """Test users log in with force_login: their password hashes need not be slow."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def fernet_keys(settings) -> Callable[..., list[str]]:
    """fernet_keys("A", "B") configures CONSOLE_ENCRYPTION_KEYS with named keys (made on first
    use and remembered), the first one encrypting; returns the key list."""
    made: dict[str, str] = {}

    def configure(*names: str) -> list[str]:
        for name in names:
            made.setdefault(name, new_key())
        settings.CONSOLE_ENCRYPTION_KEYS = [made[n] for n in names]
        vault.clear_cache()
        return settings.CONSOLE_ENCRYPTION_KEYS

    return configure


def create(slug: str, type_slug: str | None = None, *, user=None, **kwargs) -> Integration:
    return create_integration(
        slug, type_slug or slug, actor=Actor(user=user) if user else Actor.system(), **kwargs
    )
