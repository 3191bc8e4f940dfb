"""The OAuth tests' authorization server: tests/oauth_server (django-oauth-toolkit) as a
subprocess on 127.0.0.1:<free port>, its own SQLite file in tmp; and helpers to act as
its user with requests; and the console's side: an integration of it, connected."""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests
from django.test import Client

from tools_app.audit import Actor
from tools_app.integrations import vault
from tools_app.integrations.service import create_integration
from tools_app.models import Integration, OAuthConnection, Run

REPO = Path(__file__).resolve().parents[2]
PUBLIC_URL = "https://console.test"
REDIRECT_URI = f"{PUBLIC_URL}/integrations/oauth/callback/"


@dataclass
class OAuthServer:
    url: str
    port: int
    client_id: str
    client_secret: str

    def counts(self) -> dict[str, int]:
        return requests.get(f"{self.url}/counts/", timeout=10).json()

    def echo(self, token: str) -> requests.Response:
        return requests.get(
            f"{self.url}/api/echo/", headers={"Authorization": f"Bearer {token}"}, timeout=10
        )

    def user(self, name: str = "alice") -> requests.Session:
        """A browser of the provider's user, logged in."""
        session = requests.Session()
        answer = session.post(
            f"{self.url}/login/", data={"username": name, "password": "pw"}, timeout=10
        )
        assert answer.status_code == 200, answer.text
        return session

    def consent(self, session: requests.Session, authorize_url: str) -> str:
        """Follow the console's authorize redirect as the user; returns where the provider
        sends the browser back (the console's callback URL with code and state)."""
        answer = session.get(authorize_url, allow_redirects=False, timeout=10)
        assert answer.status_code == 302, answer.text[:500]
        return answer.headers["Location"]

    def expire(self, token: str) -> None:
        """End an access token at the server only (tests/oauth_server/views.py:expire)."""
        answer = requests.post(f"{self.url}/expire/", data={"token": token}, timeout=10)
        assert answer.status_code == 200, answer.text

    def revoke(self, token: str) -> None:
        answer = requests.post(
            f"{self.url}/o/revoke_token/",
            data={"token": token, "client_id": self.client_id, "client_secret": self.client_secret},
            timeout=10,
        )
        assert answer.status_code == 200, answer.text


def make(server: OAuthServer, slug: str = "provider", *, secret: str | None = None) -> Integration:
    return create_integration(
        slug,
        "generic_oauth2",
        actor=Actor.system(),
        values={
            "client_id": server.client_id,
            "authorize_url": f"{server.url}/o/authorize/",
            "token_url": f"{server.url}/o/token/",
            "revocation_url": f"{server.url}/o/revoke_token/",
            "userinfo_url": f"{server.url}/userinfo/",
            "scopes": "read",
            "api_url": f"{server.url}/api/",
        },
        secrets={"client_secret": secret or server.client_secret},
    )


def start(client: Client, server: OAuthServer, slug: str, user: str = "alice") -> str:
    """Connect on the console, consent as `user`: the callback path the provider sends
    the browser back to."""
    answer = client.post(f"/integrations/{slug}/oauth/connect/")
    assert answer.status_code == 302, answer.content[:300]
    assert answer["Location"].startswith(f"{server.url}/o/authorize/")
    assert "code_challenge_method=S256" in answer["Location"]
    back = server.consent(server.user(user), answer["Location"])
    assert back.startswith(REDIRECT_URI)
    return back[len(PUBLIC_URL) :]


def connect(client: Client, server: OAuthServer, slug: str, user: str = "alice"):
    return client.get(start(client, server, slug, user), follow=True)


def tokens(slug: str) -> tuple[str, str]:
    conn = OAuthConnection.objects.get(integration__slug=slug)
    return vault.decrypt(conn.access_ciphertext), vault.decrypt(conn.refresh_ciphertext)


def record_of(run: Run) -> str:
    """Everything a run's record keeps (its row, updates and artifacts' rows), as text."""
    run.refresh_from_db()
    fields = {f.name: getattr(run, f.name) for f in Run._meta.concrete_fields}
    kept = [fields, list(run.updates.values()), list(run.artifacts.values())]
    return json.dumps(kept, default=str)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def serve(folder: Path, redirect_uri: str, *, consent: bool = False) -> Iterator[OAuthServer]:
    """The test authorization server, for clients with this redirect URI (http allowed
    when it is one). `consent`: the user approves on DOT's consent page (a browser test);
    else the consent is skipped."""
    port = _free_port()
    secret = secrets.token_urlsafe(24)
    env = {
        **os.environ,
        "OAUTH_SERVER_DB": str(folder / "server.sqlite3"),
        "OAUTH_REDIRECT_URI": redirect_uri,
        "OAUTH_CLIENT_SECRET": secret,
        "OAUTH_CONSENT": "1" if consent else "",
        "PYTHONPATH": str(REPO),
    }
    env.pop("DJANGO_SETTINGS_MODULE", None)
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.oauth_server.serve", str(port)],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        line = process.stdout.readline() if process.stdout else ""
        assert line.startswith("ready "), f"the OAuth test server did not start: {line!r}"
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                requests.get(f"{url}/counts/", timeout=2)
                break
            except requests.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        yield OAuthServer(url, port, line.split()[1], secret)
    finally:
        process.terminate()
        process.wait(10)


@pytest.fixture(scope="session")
def oauth_server(tmp_path_factory) -> Iterator[OAuthServer]:
    with serve(tmp_path_factory.mktemp("oauth"), REDIRECT_URI) as server:
        yield server
