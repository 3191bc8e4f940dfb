"""Helpers for the integration tests: a local HTTP server standing in for provider APIs,
Fernet keys, and a shortcut to create integrations through the domain functions."""

from __future__ import annotations

import contextlib
import io
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from cryptography.fernet import Fernet

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
    headers: dict[str, str]
    body: bytes


@dataclass
class Provider:
    """What the fake provider answers. `handler` may replace the whole answer."""

    url: str = ""
    status: int = 200
    body: bytes = b'{"results": []}'
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    # Echo the Authorization header back in the body (providers do echo bad keys).
    echo_authorization: bool = False
    handler: Callable[[BaseHTTPRequestHandler], bool] | None = None
    seen: list[Seen] = field(default_factory=list)

    @property
    def last(self) -> Seen:
        return self.seen[-1]


def _make_handler(provider: Provider) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:  # keep test output quiet
            pass

        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            provider.seen.append(
                Seen(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body)
            )
            if provider.handler is not None and provider.handler(self):
                return
            if provider.delay:
                time.sleep(provider.delay)
            payload = provider.body
            if provider.echo_authorization:
                payload = json.dumps(
                    {"error": "invalid credentials", "got": self.headers.get("Authorization")}
                ).encode()
            self.send_response(provider.status)
            self.send_header("Content-Type", provider.content_type)
            self.send_header("Content-Length", str(len(payload)))
            for name, value in provider.headers.items():
                self.send_header(name, value)
            self.end_headers()
            if self.command != "HEAD":
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self.wfile.write(payload)

        do_GET = do_POST = do_HEAD = _answer

    return Handler


def send_json(handler: BaseHTTPRequestHandler, data: object) -> bool:
    """Answer 200 with `data` as JSON, from a Provider.handler (True: answered)."""
    body = json.dumps(data).encode()
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)
    return True


@pytest.fixture
def fake_provider() -> Iterator[Provider]:
    state = Provider()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(state))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()


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
