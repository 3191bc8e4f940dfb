"""Egress exceptions on the System page: one step for an admin, audited, no restart; the
own-host rule refuses the console's own port, not every service an admin allowed."""

from __future__ import annotations

import json

import pytest

from tests.http_tools.test_http_tool_runs import RunStatus, Server, make, run_of, toolmd
from tools_app.egress import config
from tools_app.egress import policy as egress_policy
from tools_app.http_tools.context import validation_context
from tools_app.manifest.folder import validate_files
from tools_app.models import AuditEvent, EgressException

pytestmark = pytest.mark.django_db(transaction=True)


def add(client, entry: str, note: str = ""):
    return client.post("/system/egress/", {"entry": entry, "note": note})


def test_an_admin_allows_a_destination_and_removes_it(console_admin_client):
    response = add(console_admin_client, "127.0.0.1:8888", "searxng")
    assert response.status_code == 302 and response["Location"] == "/system/#egress"
    exception = EgressException.objects.get()
    assert exception.entry == "127.0.0.1:8888" and exception.note == "searxng"
    event = AuditEvent.objects.get(action="egress.allow")
    assert event.actor == "ada" and event.data == {"entry": "127.0.0.1:8888", "note": "searxng"}

    policy = config.tool_policy(())
    decision = policy.decide("127.0.0.1", 8888)
    assert decision.allowed and "the System page" in decision.reason
    assert not policy.decide("127.0.0.1", 8889).allowed

    page = console_admin_client.get("/system/").content.decode()
    assert "<code>127.0.0.1:8888</code>" in page and "127.0.0.1:8888 (the System page)" in page

    removed = console_admin_client.post(f"/system/egress/{exception.pk}/remove/")
    assert removed.status_code == 302
    assert not EgressException.objects.exists()
    assert AuditEvent.objects.filter(action="egress.remove").exists()
    assert not config.tool_policy(()).decide("127.0.0.1", 8888).allowed


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("", "This field is required."),
        ("not an address", "not an address"),
        ("127.0.0.1:8888, 10.0.0.1", "One destination at a time."),
        ("127.0.0.1:99999", "99999"),
    ],
)
def test_it_says_what_is_wrong_with_an_entry(console_admin_client, entry, message):
    response = add(console_admin_client, entry)
    assert response.status_code == 400
    assert message in response.content.decode()
    assert not EgressException.objects.exists()


def test_one_destination_is_one_row_however_it_is_written(console_admin_client):
    add(console_admin_client, "127.0.0.1:8888")
    again = add(console_admin_client, "127.0.0.1/32:8888")
    assert (
        again.status_code == 400 and "127.0.0.1:8888 is already allowed." in again.content.decode()
    )
    assert EgressException.objects.count() == 1


def test_only_admins_change_exceptions(developer_client, viewer_client, console_admin):
    EgressException.objects.create(entry="10.0.0.1")
    for client in (developer_client, viewer_client):
        assert add(client, "127.0.0.1:8888").status_code == 403
        assert (
            client.post(f"/system/egress/{EgressException.objects.get().pk}/remove/").status_code
            == 403
        )
    assert EgressException.objects.count() == 1


def test_a_refusal_says_how_to_allow_the_destination():
    _, decision = egress_policy.build().decide_host("127.0.0.1", 8888)
    assert not decision.allowed
    assert "Network egress on the System page" in decision.reason
    assert egress_policy.ALLOW_SETTING in decision.reason


@pytest.fixture
def server(settings, stand_in):
    srv = Server(stand_in)
    settings.ALLOWED_HOSTS = ["console.test", "127.0.0.1", "localhost"]
    settings.TOOL_NETWORK_ALLOW = ""
    yield srv
    srv.close()


ITEM = """  method: GET
  url: BASE/item/{{item_id}}
"""
ITEM_INPUTS = """  item_id: {type: string, description: Item}
"""


def test_an_http_tool_reaches_a_local_service_the_system_page_allowed(server):
    text = toolmd(server, ITEM, inputs=ITEM_INPUTS)
    files = {"TOOL.md": text.encode()}
    refused = validate_files(files, "fetcher/TOOL.md", context=validation_context())
    assert "this console's own host" in " ".join(str(p) for p in refused.problems)

    EgressException.objects.create(entry=f"127.0.0.1:{server.port}")
    tool = make(text)
    run = run_of(tool, {"item_id": "a1"})

    assert run.status == RunStatus.SUCCEEDED, run.result
    assert json.loads(run.result["content"][0]["text"])["data"]["id"] == "a1"


def test_the_consoles_own_port_stays_refused_even_when_allowed(server, settings):
    settings.PUBLIC_URL = f"http://127.0.0.1:{server.port}"
    EgressException.objects.create(entry=f"127.0.0.1:{server.port}")
    files = {"TOOL.md": toolmd(server, ITEM, inputs=ITEM_INPUTS).encode()}

    result = validate_files(files, "fetcher/TOOL.md", context=validation_context())

    assert result.manifest is None
    assert "this console's own host" in " ".join(str(p) for p in result.problems)
