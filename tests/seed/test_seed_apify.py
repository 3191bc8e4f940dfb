"""The seed's Apify tools (kind: http, seed/tools/apify_*): run against a local HTTP server
standing in for api.apify.com (allowed through CONSOLE_TOOL_NETWORK_ALLOW, as an admin
would allow a provider), with the `apify` integration's token as a bearer token; their
samples are Apify's documented examples; they sync into the database and DATA_PATH."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.integrations import fernet_keys  # noqa: F401 (fixture)
from tests.support.stand_in import Reply, Request
from tools_app.audit import Actor
from tools_app.catalog import bundle, datapath
from tools_app.catalog.sync import sync_tools
from tools_app.catalog.versions import save_version
from tools_app.http_tools.context import validation_context
from tools_app.integrations.service import create_integration
from tools_app.manifest.folder import validate_files
from tools_app.models import Run, Tool
from tools_app.models.runs import RunStatus, RunVia
from tools_app.runs import execute, start

SEED = Path(__file__).resolve().parents[2] / "seed" / "tools"
APIFY_TOOLS = ("apify_run_actor", "apify_get_run", "apify_get_dataset_items")
TOKEN = "apify_api_t0k3n-9d2c"  # distinctive: results must never carry it
RUN = json.loads((SEED / "apify_run_actor" / "samples" / "run.json").read_text())["body"]
ITEMS = [{"url": "https://example.com/", "text": "Example Domain"}, {"url": "https://example.org/"}]

pytestmark = pytest.mark.django_db(transaction=True)


class FakeApify:
    """Answers the three endpoints as Apify documents them."""

    def __init__(self, stand_in) -> None:
        self.seen: list[dict] = []
        self.port = stand_in(self.answer, http11=True, methods=("GET", "POST")).port

    def answer(self, request: Request) -> Reply:
        path, query = request.route, request.query
        self.seen.append({"method": request.method, "path": path, "query": query,
                          "body": request.body, "headers": request.headers})  # fmt: skip
        if request.method == "POST" and path == "/v2/acts/apify~hello-world/runs":
            status, data = 201, RUN
        elif request.method == "GET" and path == "/v2/actor-runs/HG7ML7M8z78YcAPEB":
            status, data = 200, RUN
        elif request.method == "GET" and path == "/v2/datasets/wmKPijuyDnPZAPRMk/items":
            status, data = 200, ITEMS
        else:
            status, data = 404, {"error": {"type": "record-not-found"}}
        return Reply(status, json.dumps(data).encode(), "application/json; charset=utf-8")


@pytest.fixture
def apify_api(settings, fernet_keys, stand_in) -> FakeApify:  # noqa: F811
    fake = FakeApify(stand_in)
    settings.ALLOWED_HOSTS = ["console.test"]
    settings.TOOL_NETWORK_ALLOW = f"127.0.0.1:{fake.port}"
    fernet_keys("A")
    create_integration("apify", "apify", actor=Actor.system(), secrets={"token": TOKEN})
    return fake


def _publish_against(fake: FakeApify, name: str) -> Tool:
    """The seed tool as shipped, its API host pointed at the stand-in server."""
    files = bundle.read_tool_dir(SEED / name)
    text = (
        files["TOOL.md"].decode().replace("https://api.apify.com", f"http://127.0.0.1:{fake.port}")
    )
    files["TOOL.md"] = text.encode()
    save_version(name, files, actor=Actor.system(), publish=True)
    return Tool.objects.get(name=name)


def _run(tool: Tool, params: dict) -> Run:
    run = start.start_run(
        tool.published_version, params, actor=Actor.system(), via=RunVia.API, enqueue=False
    )
    return execute.execute_run(run.pk)


def test_it_runs_an_actor_with_the_input_as_body_and_the_token_as_bearer(apify_api):
    tool = _publish_against(apify_api, "apify_run_actor")
    run = _run(tool, {"actor_id": "apify~hello-world", "input": {"message": "hi"},
                      "wait_for_finish": 60})  # fmt: skip

    assert run.status == RunStatus.SUCCEEDED, run.result
    sent = apify_api.seen[0]
    assert sent["method"] == "POST" and sent["path"] == "/v2/acts/apify~hello-world/runs"
    assert sent["query"] == "waitForFinish=60"  # the optional params not given are left out
    assert sent["headers"]["Authorization"] == f"Bearer {TOKEN}"
    assert json.loads(sent["body"]) == {"message": "hi"}
    assert run.result["structuredContent"] == {
        "run_id": "HG7ML7M8z78YcAPEB",
        "actor_id": "HDSasDasz78YcAPEB",
        "status": "RUNNING",
        "status_message": "Actor is running",
        "started_at": "2019-11-30T07:34:24.202Z",
        "finished_at": "2019-12-12T09:30:12.202Z",
        "dataset_id": "wmKPijuyDnPZAPRMk",
        "key_value_store_id": "eJNzqsbPiopwJcgGQ",
    }
    assert TOKEN not in json.dumps(run.result)


def test_it_sends_an_empty_input_when_none_is_given(apify_api):
    run = _run(_publish_against(apify_api, "apify_run_actor"), {"actor_id": "apify~hello-world"})
    assert run.status == RunStatus.SUCCEEDED, run.result
    assert json.loads(apify_api.seen[0]["body"]) == {}


def test_it_gets_a_runs_status(apify_api):
    run = _run(_publish_against(apify_api, "apify_get_run"), {"run_id": "HG7ML7M8z78YcAPEB"})
    assert run.status == RunStatus.SUCCEEDED, run.result
    assert apify_api.seen[0]["headers"]["Authorization"] == f"Bearer {TOKEN}"
    structured = run.result["structuredContent"]
    assert structured["status"] == "RUNNING" and structured["exit_code"] == 0
    assert structured["usage_total_usd"] == 0.2654
    assert structured["dataset_id"] == "wmKPijuyDnPZAPRMk"


def test_it_reads_a_datasets_items_as_text(apify_api):
    tool = _publish_against(apify_api, "apify_get_dataset_items")
    run = _run(tool, {"dataset_id": "wmKPijuyDnPZAPRMk", "limit": 2, "clean": True})
    assert run.status == RunStatus.SUCCEEDED, run.result
    assert apify_api.seen[0]["query"] == "format=json&limit=2&clean=true"
    assert json.loads(run.result["content"][0]["text"]) == ITEMS
    assert "structuredContent" not in run.result  # items depend on the Actor: no outputs


def test_it_fails_clearly_for_an_unknown_run(apify_api):
    run = _run(_publish_against(apify_api, "apify_get_run"), {"run_id": "nope"})
    assert run.status == RunStatus.FAILED
    assert "404" in run.result["content"][0]["text"]


def test_the_apify_tools_declare_only_documented_outputs(db):
    for name in APIFY_TOOLS:
        files = bundle.read_tool_dir(SEED / name)
        result = validate_files(files, f"{name}/TOOL.md", context=validation_context())
        assert result.ok and result.problems == [], result.problems
        manifest = result.manifest
        assert manifest.kind == "http" and manifest.integrations == ("apify",)
        assert manifest.request["url"].startswith("https://api.apify.com/v2/")
        assert manifest.request["headers"] == {"Authorization": "Bearer {{apify.APIFY_TOKEN}}"}
        for sample in (p for p in files if p.startswith("samples/")):
            assert json.loads(files[sample])["source"].startswith("https://docs.apify.com/api/v2/")
    name = "apify_get_dataset_items"
    items = validate_files(
        bundle.read_tool_dir(SEED / name), f"{name}/TOOL.md", context=validation_context()
    ).manifest
    assert items.outputs == {} and items.request["response"] == "text"


def test_the_apify_tools_sync_into_the_database_and_data_path(db, settings):
    lines = {line.name: line.status for line in sync_tools(SEED)}
    for name in APIFY_TOOLS:
        assert lines[name] == "imported"
        assert Tool.objects.get(name=name).published_version is not None
    mirrored = datapath.tools_dir() / "apify_run_actor"
    assert (mirrored / "TOOL.md").is_file()
    assert json.loads((mirrored / "samples" / "run.json").read_text())["status"] == 201
