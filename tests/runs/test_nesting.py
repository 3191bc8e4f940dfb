"""One nesting cap (tools_app/lib/nesting.py, 64 levels) on every JSON that enters the console:
API params, the run form's raw JSON and `json` inputs, presets, HTTP-tool samples (import,
editor save, live validation, the samples page), zip imports, OpenAPI documents. Past it
each entry point answers a 4xx naming the path where it got too deep, never a 500; and a
run stored before the cap with a deep `json` input still renders in the admin."""

from __future__ import annotations

import json
import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from tests.support.editor import editor_data, file_index, zip_of
from tests.support.forms import submit
from tests.support.integrations import fake_provider  # noqa: F401 (fixture)
from tests.support.stand_in import Reply, Request
from tools_app.audit import Actor
from tools_app.catalog.versions import save_version
from tools_app.lib import nesting
from tools_app.models import Run, Tool, ToolPreset, ToolVersion
from tools_app.models.runs import RunVia
from tools_app.models.tokens import AgentToken, Scope

pytestmark = pytest.mark.django_db

CAP = nesting.MAX_DEPTH
INPUTS = {
    "query": {"type": "string", "description": "Query.", "optional": True},
    "config": {"type": "json", "description": "Config.", "optional": True},
}
# The path each refusal names: the input, then an index per level down to the 65th.
CONFIG_PATH = "params.config" + "[0]" * (CAP - 1)
TOO_DEEP = f"nested deeper than {CAP} levels"


def nested(levels: int) -> str:
    """JSON arrays `levels` deep."""
    return "[" * levels + "]" * levels


@pytest.fixture
def tool(make_tool) -> Tool:
    return make_tool("alpha", language="python", inputs=INPUTS)


@pytest.fixture
def agent() -> Client:
    _, raw = AgentToken.issue("agent", [Scope.TOOLS_INVOKE])
    return Client(headers={"Authorization": f"Bearer {raw}"})


def invoke(agent: Client, config: str):
    body = '{"params": {"query": "a", "config": ' + config + "}}"
    return agent.post("/api/v1/tools/alpha/invoke", body, content_type="application/json")


# --------------------------------------------------------------------------------------
# The function everyone calls


def test_it_measures_without_recursion_and_names_the_path():
    deep: list = []
    node = deep
    for _ in range(200_000):  # far past any recursion limit
        node.append([])
        node = node[0]
    assert nesting.too_deep(deep, "params") == "params" + "[0]" * CAP
    assert nesting.too_deep(json.loads(nested(CAP))) is None
    value = {"a": {"b c": [1, {"d": json.loads(nested(CAP))}]}}
    assert nesting.too_deep(value) == 'params.a["b c"][1].d' + "[0]" * (CAP - 4)


@pytest.mark.parametrize("levels", [CAP + 1, 900, 5000, 200_000])
def test_loads_refuses_text_too_deep_for_the_parser_with_the_same_path(levels):
    text = '{"x": {"y": [1, ' + nested(levels) + "]}}"
    with pytest.raises(nesting.TooDeep) as caught:
        nesting.loads(text)
    assert caught.value.path == "params.x.y[1]" + "[0]" * (CAP - 3)
    assert str(caught.value).endswith(TOO_DEEP)


# --------------------------------------------------------------------------------------
# The API


def test_the_api_accepts_params_at_the_cap(tool, agent, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        response = invoke(agent, nested(CAP - 1))  # config is level 2 of the params
    assert response.status_code == 202, response.content
    assert Run.objects.count() == 1


@pytest.mark.parametrize("levels", [CAP, 900, 100_000])
def test_the_api_refuses_params_past_the_cap_with_the_path(tool, agent, levels):
    response = invoke(agent, nested(levels))

    assert response.status_code == 400, response.content[:300]
    body = response.json()
    assert body["error"] == "Cannot parse request body"
    assert body["detail"] == [f"{CONFIG_PATH}: {TOO_DEEP}"]
    assert not Run.objects.exists()


def test_a_caller_of_the_run_path_gets_the_same_refusal(tool):
    # What MCP, the CLI and presets go through after parsing: schema validation.
    from tools_app.runs import start

    with pytest.raises(start.InvalidParams) as caught:
        start.start_run(
            tool.published_version,
            {"config": json.loads(nested(CAP))},
            actor=Actor.system(),
            via=RunVia.COMMAND,
        )
    assert caught.value.errors == [f"{CONFIG_PATH}: {TOO_DEEP}"]


# --------------------------------------------------------------------------------------
# The run form: raw JSON and `json` inputs


def form_errors(response) -> list[str]:
    page = response.content.decode()
    return [
        re.sub(r"&quot;|&#x27;", '"', e)
        for e in re.findall(r'<p class="error"[^>]*>(.*?)</p>', page, re.S)
    ]


@pytest.mark.parametrize("levels", [CAP, 900, 100_000])
def test_the_run_form_refuses_a_deep_json_input_with_the_path(tool, developer_client, levels):
    response = developer_client.post("/tools/alpha/run/", {"config": nested(levels)})

    assert response.status_code == 400
    assert f"{CONFIG_PATH}: {TOO_DEEP}" in form_errors(response)
    assert not Run.objects.exists()


@pytest.mark.parametrize("levels", [CAP, 900, 100_000])
def test_the_run_forms_raw_json_refuses_deep_params_with_the_path(tool, developer_client, levels):
    params = '{"config": ' + nested(levels) + "}"
    response = developer_client.post("/tools/alpha/run/", {"raw-json": "1", "params": params})

    assert response.status_code == 400
    assert f"{CONFIG_PATH}: {TOO_DEEP}" in form_errors(response)
    assert not Run.objects.exists()


# --------------------------------------------------------------------------------------
# The admin's run page


def test_the_admin_run_page_renders_a_run_stored_with_deep_params(tool, superuser_client):
    # A run created before the cap (the API took 900 levels): its page must still render.
    deep = json.loads(nested(900))
    run = Run.objects.create(
        tool=tool, version=tool.published_version, via=RunVia.API, params={"config": deep}
    )
    run.result = {"content": [{"type": "text", "text": "ok"}], "structuredContent": deep}
    run.save()

    response = superuser_client.get(f"/admin/tools_app/run/{run.pk}/change/")

    assert response.status_code == 200
    assert TOO_DEEP in response.content.decode()


def test_pages_offering_a_stored_deep_run_again_do_not_500(tool, developer, developer_client):
    """The run form pre-fills the person's last params and "Run again with these inputs";
    the run page shows the params and the raw result JSON. Indenting a value stored
    before the cap (900 deep) recursed to a 500 on each."""
    deep = json.loads(nested(900))
    run = Run.objects.create(
        tool=tool,
        version=tool.published_version,
        via=RunVia.BROWSER,
        user=developer,
        params={"query": "kept", "config": deep},
        result={"content": [{"type": "text", "text": "ok"}], "structuredContent": deep},
        status="succeeded",
    )

    for url in ("/tools/alpha/run/", f"/tools/alpha/run/?again={run.pk}", f"/runs/{run.pk}/"):
        response = developer_client.get(url)
        assert response.status_code == 200, url
    form = developer_client.get(f"/tools/alpha/run/?again={run.pk}").content.decode()
    assert 'value="kept"' in form and "[[[[" not in form
    page = developer_client.get(f"/runs/{run.pk}/").content.decode()
    assert f"(not shown: {CONFIG_PATH}: {TOO_DEEP})" in page.replace("&quot;", '"')
    assert "(not shown: result.structuredContent" in page


@pytest.fixture
def superuser_client(django_user_model) -> Client:
    user = django_user_model.objects.create_superuser("root", "root@example.org", "pw")
    client = Client()
    client.force_login(user)
    return client


# --------------------------------------------------------------------------------------
# Presets


def test_a_preset_past_the_cap_is_a_form_error_with_the_path(
    make_tool, console_admin_client, levels=5000
):
    inputs = {"config": {**INPUTS["config"], "visibility": "user-only"}}
    make_tool("alpha", language="python", inputs=inputs)
    for value in (nested(CAP), nested(levels)):
        response = submit(
            console_admin_client,
            "/tools/alpha/presets/",
            {"input": "config", "value": value},
            button="Save preset",
        )
        assert response.status_code in (400, 422), response.status_code
        assert f"{CONFIG_PATH}: {TOO_DEEP}" in response.content.decode()
    assert not ToolPreset.objects.exists()


# --------------------------------------------------------------------------------------
# HTTP-tool samples: import, editor save, live validation


HTTP_TOOLMD = b"""---
name: items
description: Read one item.
kind: http
inputs:
  item_id: {type: string, description: The item id}
request:
  method: GET
  url: https://api.example.com/v1/items/{{item_id}}
outputs:
  id: {type: string, path: data.id, description: The id}
---
# Items
"""
GOOD_SAMPLE = json.dumps({"source": "https://docs.example.com", "status": 200, "body": {}})
SAMPLE_GOOD = json.dumps(
    {"source": "https://docs.example.com", "status": 200, "body": {"data": {"id": "1"}}}
).encode()
SAMPLE_PATH = "body.data" + "[0]" * (CAP - 2)


def deep_sample(levels: int = 5000) -> bytes:
    text = '{"source": "https://docs.example.com", "status": 200, "body": {"data": '
    return (text + nested(levels) + "}}").encode()


@pytest.mark.parametrize("levels", [CAP, 5000])
def test_importing_a_deep_sample_is_refused_with_the_file_and_path(developer_client, levels):
    files = {
        "items/TOOL.md": HTTP_TOOLMD,
        "items/samples/ok.json": SAMPLE_GOOD,
        "items/samples/deep.json": deep_sample(levels),
    }
    changes = {"file": SimpleUploadedFile("tools.zip", zip_of(files), "application/zip")}

    response = submit(developer_client, "/tools/-/import/", changes, button="Import")

    assert response.status_code == 422  # an invalid tool, as for any other problem
    html = response.content.decode().replace("&quot;", '"')
    assert "items/samples/deep.json" in html
    assert f"{SAMPLE_PATH}: {TOO_DEEP}" in html
    assert not Tool.objects.exists()


@pytest.fixture
def http_tool() -> Tool:
    files = {"TOOL.md": HTTP_TOOLMD, "samples/ok.json": SAMPLE_GOOD}
    save_version("items", files, actor=Actor.system(), publish=False)
    return Tool.objects.get(name="items")


def with_deep_sample(client: Client) -> dict:
    data = editor_data(client, "items")
    data[f"files-{file_index(data, 'samples/ok.json')}-content"] = deep_sample().decode()
    return data


def test_saving_a_deep_sample_in_the_editor_is_refused(http_tool, developer_client):
    response = developer_client.post("/tools/items/edit/", with_deep_sample(developer_client))

    assert response.status_code == 422
    html = response.content.decode().replace("&quot;", '"')
    assert f"{SAMPLE_PATH}: {TOO_DEEP}" in html
    assert ToolVersion.objects.count() == 1


def test_live_validation_reports_a_deep_sample(http_tool, developer_client):
    headers = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "problems"}
    data = with_deep_sample(developer_client)

    response = developer_client.post("/tools/items/validate/", data, **headers)

    assert response.status_code == 200
    assert f"{SAMPLE_PATH}: {TOO_DEEP}" in response.content.decode().replace("&quot;", '"')


# --------------------------------------------------------------------------------------
# OpenAPI import


@pytest.mark.parametrize("levels", [CAP, 5000])
def test_an_openapi_document_past_the_cap_is_refused_with_the_path(levels):
    from tools_app.http_tools.openapi import document as openapi_document

    text = '{"openapi": "3.1.0", "info": {"x": ' + nested(levels) + "}}"
    with pytest.raises(openapi_document.OpenApiError) as caught:
        openapi_document.parse_document(text.encode())
    assert f"info.x{'[0]' * (CAP - 2)}: {TOO_DEEP}" in str(caught.value)


# --------------------------------------------------------------------------------------
# An http tool's response: it becomes the run's structured result and kept response


@pytest.mark.parametrize("levels", [CAP - 1, 5000])
def test_an_http_response_past_the_cap_fails_the_run_with_the_path(
    settings,
    fake_provider,  # noqa: F811 (the fixture imported above)
    levels,
):
    from tools_app.models.runs import RunStatus
    from tools_app.runs import execute as run_execute
    from tools_app.runs import start

    settings.ALLOWED_HOSTS = ["testserver"]
    settings.TOOL_NETWORK_ALLOW = fake_provider.url.removeprefix("http://")
    body = ('{"data": ' + nested(levels) + "}").encode()

    def deep(request: Request) -> Reply:
        return Reply(200, body, "application/json")

    fake_provider.handler = deep
    toolmd = (
        "---\nname: deep\ndescription: Gets a deep answer.\nkind: http\n"
        f"request:\n  method: GET\n  url: {fake_provider.url}/item\n---\n# Deep\n"
    )
    save_version("deep", {"TOOL.md": toolmd.encode()}, actor=Actor.system(), publish=True)
    version = Tool.objects.get(name="deep").published_version
    run = start.start_run(version, {}, actor=Actor.system(), via=RunVia.COMMAND, enqueue=False)

    run = run_execute.execute_run(run.pk)

    assert run.status == RunStatus.FAILED, run.result
    text = run.result["content"][0]["text"]
    assert text.endswith(f"body.data{'[0]' * (CAP - 2)}: {TOO_DEEP}"), text
    assert run.response is None
