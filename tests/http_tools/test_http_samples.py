"""Samples for http tools from the browser (docs/http-tools.md): "Save this response as a
sample" on a successful run's page (stored redacted, the run id as its source, in a new
draft version through tools_app.catalog.versions), and a documented example pasted with its URL."""

from __future__ import annotations

import json
import uuid

import pytest
from django.test import Client

from tests.support import make_user
from tests.support.forms import submit
from tests.support.integrations import fake_provider, send_json  # noqa: F401 (fixture)
from tests.support.stand_in import Reply, Request
from tools_app.audit import Actor
from tools_app.catalog.versions import InvalidTool, publish_version, save_version
from tools_app.models import AuditEvent, Run, Tool
from tools_app.models.runs import RunStatus, RunVia
from tools_app.roles import DEVELOPER
from tools_app.runs import execute, start

pytestmark = pytest.mark.django_db

CANARY = f"canary-sample-{uuid.uuid4().hex}"
SAVE = "Save this response as a sample"


@pytest.fixture
def provider(fake_provider):  # noqa: F811 (the fixture above, by another name)
    return fake_provider


def echo(request: Request) -> Reply:
    """Providers do echo credentials back; the response must be stored without them."""
    data = {"data": {"id": "r1", "status": "READY", "echo": request.header("X-Key", "")}}
    return send_json(request, data)


def toolmd(url: str, outputs: str = "") -> bytes:
    return (
        "---\nname: status\ndescription: Gets a status.\nkind: http\ninputs:\n"
        "  key: {type: string, description: Key, sensitive: true}\n"
        f'request:\n  method: GET\n  url: {url}/item\n  headers: {{X-Key: "{{{{key}}}}"}}\n'
        + (f"outputs:\n{outputs}" if outputs else "")
        + "---\n# Status\n"
    ).encode()


OUTPUTS = "  status: {type: string, path: data.status}\n"


@pytest.fixture
def tool(settings, provider) -> Tool:
    settings.ALLOWED_HOSTS = ["testserver"]
    settings.TOOL_NETWORK_ALLOW = provider.url.removeprefix("http://")
    provider.handler = echo
    save_version("status", {"TOOL.md": toolmd(provider.url)}, actor=Actor.system(), publish=True)
    return Tool.objects.get(name="status")


def finished_run(tool: Tool, user=None) -> Run:
    """A successful run, started by `user` (the only one but admins who may read it)."""
    actor = Actor(user=user) if user is not None else Actor.system()
    run = start.start_run(tool.published_version, {"key": CANARY}, actor=actor,
                         via=RunVia.BROWSER, enqueue=False)  # fmt: skip
    run = execute.execute_run(run.pk)
    assert run.status == RunStatus.SUCCEEDED, run.result
    return run


def test_it_saves_a_run_response_as_a_sample_that_unblocks_publishing(
    tool, provider, developer, developer_client
) -> None:
    with_output = {"TOOL.md": toolmd(provider.url, OUTPUTS)}
    with pytest.raises(InvalidTool) as blocked:
        save_version("status", with_output, actor=Actor.system())
    assert "unverified output" in str(blocked.value)
    run = finished_run(tool, developer)

    response = submit(developer_client, f"/runs/{run.pk}/", button=SAVE)

    assert response.status_code == 302
    assert response["Location"] == "/tools/status/samples/"
    tool.refresh_from_db()
    version = tool.versions.get(number=2)
    assert version.is_draft
    name = f"samples/run-{run.pk.hex[:12]}.json"
    sample = json.loads(version.file_bytes()[name])
    assert sample["source"] == str(run.pk)
    assert sample["status"] == 200
    assert sample["body"]["data"] == {"id": "r1", "status": "READY", "echo": "{{input.key}}"}
    assert CANARY not in json.dumps(version.files)
    assert AuditEvent.objects.filter(action="tool.version.create").count() == 2

    # The same output now has a sample proving its path: it saves and publishes.
    saved = save_version("status", {**version.file_bytes(), **with_output}, actor=Actor.system())
    publish_version(saved.version, actor=Actor.system())
    assert Tool.objects.get(name="status").published_version == saved.version
    page = developer_client.get("/tools/status/samples/").content.decode()
    assert f"run-{run.pk.hex[:12]}.json" in page and CANARY not in page


def test_it_offers_the_button_to_developers_on_successful_http_runs(
    tool, developer, developer_client, viewer_client
) -> None:
    run = finished_run(tool, developer)
    assert SAVE in developer_client.get(f"/runs/{run.pk}/").content.decode()
    assert SAVE not in viewer_client.get(f"/runs/{run.pk}/").content.decode()
    assert viewer_client.post(f"/runs/{run.pk}/sample/").status_code == 403
    # The response is the run's output: another developer may not read it, nor keep it.
    other = make_user("dev2", DEVELOPER)
    other_client = Client()
    other_client.force_login(other)
    assert SAVE not in other_client.get(f"/runs/{run.pk}/").content.decode()
    assert other_client.post(f"/runs/{run.pk}/sample/").status_code == 403
    assert tool.versions.count() == 1
    # A failed run kept no response: nothing to save.
    Run.objects.filter(pk=run.pk).update(status=RunStatus.FAILED)
    assert SAVE not in developer_client.get(f"/runs/{run.pk}/").content.decode()
    assert developer_client.post(f"/runs/{run.pk}/sample/").status_code == 404


def test_it_saves_a_pasted_documented_example(tool, provider, developer_client) -> None:
    body = json.dumps({"data": {"id": "d1", "status": "DONE"}})
    changes = {"source": "https://docs.example.com/api#get-item", "name": "docs-item",
               "status": "200", "body": body}  # fmt: skip
    response = submit(
        developer_client, "/tools/status/samples/", changes, button="Save as a sample"
    )
    assert response.status_code == 302
    version = Tool.objects.get(name="status").versions.get(number=2)
    sample = json.loads(version.file_bytes()["samples/docs-item.json"])
    assert sample == {"source": "https://docs.example.com/api#get-item", "status": 200,
                      "body": {"data": {"id": "d1", "status": "DONE"}}}  # fmt: skip
    # It proves the output's path too.
    save_version("status", {**version.file_bytes(), "TOOL.md": toolmd(provider.url, OUTPUTS)},
                 actor=Actor.system())  # fmt: skip


def test_it_says_what_is_wrong_with_a_pasted_example(tool, developer_client) -> None:
    changes = {"source": "javascript:alert(1)", "name": "../x", "status": "200",
               "body": '{"data": [1, 2,]}'}  # fmt: skip
    response = submit(
        developer_client, "/tools/status/samples/", changes, button="Save as a sample"
    )
    assert response.status_code == 400
    page = response.content.decode()
    assert "Enter a valid URL." in page
    assert "Use a-z, 0-9, _ and -" in page
    assert "Response body: not valid JSON: Expecting value (line 1, column 16)." in page
    assert Tool.objects.get(name="status").versions.count() == 1
