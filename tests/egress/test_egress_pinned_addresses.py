"""A connection uses exactly the addresses the egress policy judged (egress_policy.Policy.
decide_host, egress_http.EgressBackend): a name that resolves to a public address and to
127.0.0.1 is refused whole, and nothing ever connects to its loopback address, for http
tools, connection tests and OpenAPI import alike.

The name's DNS is the test double (socket.getaddrinfo, which egress_policy.resolve asks). Its
public address is the test namespace's (tests/support/egress.py), where nothing listens
on the port used: a connection there is reset at once, so a client that fell back to the
name's next address would reach the listener on 127.0.0.1 straight away."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Iterator

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from tests.support import egress as support
from tests.support.forms import submit
from tests.support.integrations import fast_passwords  # noqa: F401 (fixture)
from tools_app.audit import Actor
from tools_app.catalog.versions import save_version
from tools_app.egress import policy as egress_policy
from tools_app.models import Tool
from tools_app.models.runs import RunStatus, RunVia
from tools_app.runs import execute, start

NAME = "mixed.egress.test"


class Listener:
    """A TCP listener on the host's 127.0.0.1 recording every connection it accepts."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.accepted: list[tuple[str, int]] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, peer = self.sock.accept()
                self.accepted.append(peer)
                conn.close()

    def close(self) -> None:
        self.sock.close()


@pytest.fixture(scope="module")
def hosts() -> Iterator[support.EgressHosts]:
    with support.test_hosts() as made:
        yield made


@pytest.fixture
def loopback(monkeypatch, hosts) -> Iterator[Listener]:
    """NAME resolves to [the public test host, 127.0.0.1]; the listener is on 127.0.0.1
    at the port every test here connects to."""
    listener = Listener()
    real = socket.getaddrinfo

    def mixed(host, *args, **kwargs):
        if host == NAME:
            return [
                (socket.AF_INET, socket.SOCK_STREAM, 6, "", (hosts.public, 0)),
                (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", 0)),
            ]
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", mixed)
    yield listener
    listener.close()
    assert listener.accepted == [], "a connection reached the name's loopback address"


def test_it_judges_every_address_and_hands_the_connection_none_when_one_is_refused(loopback, hosts):
    judged, decision = egress_policy.build("").decide_host(NAME, loopback.port)
    assert not decision.allowed
    assert decision.reason == (
        f"{NAME}:{loopback.port} is refused by the egress policy: 127.0.0.1 is the host's loopback"
        f" (to allow it: {egress_policy.ALLOW_HINT})"
    )
    assert judged == []
    # Both addresses were judged: the refusal is the second one's.
    assert [str(ip) for ip in egress_policy.resolve(NAME)] == [hosts.public, "127.0.0.1"]


@pytest.mark.django_db(transaction=True)
def test_it_never_lets_an_http_tool_reach_the_names_loopback_address(loopback):
    text = (
        "---\nname: mixed\ndescription: Calls a name with two addresses.\nkind: http\n"
        f"request:\n  url: https://{NAME}:{loopback.port}/\n  response: text\n---\n# M\n"
    )
    sample = {"source": "https://docs.example.com/", "status": 200, "body": {"ok": True}}
    save_version(
        "mixed",
        {"TOOL.md": text.encode(), "samples/ok.json": json.dumps(sample).encode()},
        actor=Actor.system(),
        publish=False,
    )
    version = Tool.objects.get(name="mixed").versions.get()
    run = start.start_run(version, {}, actor=Actor.system(), via=RunVia.BROWSER, enqueue=False)
    run = execute.execute_run(run.pk)
    assert run.status == RunStatus.FAILED, run.result
    assert "127.0.0.1 is the host's loopback" in run.result["content"][0]["text"]


def test_it_never_lets_a_connection_test_reach_the_names_loopback_address(
    loopback, console_admin_client
):
    url = reverse("integration_create", args=["searxng"])
    changes = {"field_url": f"http://{NAME}:{loopback.port}/"}
    page = submit(
        console_admin_client, url, changes, form_id="integration-form", button="Test connection"
    ).content.decode()
    assert f"{NAME}:{loopback.port} is refused by the egress policy" in page


def test_it_never_lets_an_openapi_import_fetch_the_names_loopback_address(loopback, db):
    with pytest.raises(CommandError, match="127.0.0.1 is the host's loopback"):
        call_command("import_openapi", f"http://{NAME}:{loopback.port}/openapi.json")
