"""Runs of kind: http tools (docs/http-tools.md, tools_app/http_tools/execute.py) against local HTTP
servers on 127.0.0.1, allowed through CONSOLE_TOOL_NETWORK_ALLOW as an admin would."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator

import pytest

from tests.support.forms import submit
from tests.support.integrations import fernet_keys  # noqa: F401 (fixture)
from tests.support.stand_in import Reply, Request, json_reply
from tools_app.audit import Actor
from tools_app.catalog.versions import save_version
from tools_app.http_tools import execute as http_execute
from tools_app.http_tools.context import validation_context
from tools_app.integrations.service import create_integration
from tools_app.models import Run, RunArtifact, Tool
from tools_app.models.runs import RunStatus, RunVia
from tools_app.runs import execute as run_execute
from tools_app.runs import start

TOKEN = "s3cr3t-apify-token-7f"
SAMPLE = {"source": "https://docs.example.com/items", "status": 200,
          "body": {"data": {"id": "x", "status": "READY", "auth": "Bearer x"}}}  # fmt: skip


class Server:
    """Two local servers (`port` and `other_port`) giving the same answers and recording
    every request either got in `seen`."""

    def __init__(self, stand_in) -> None:
        self.seen: list[dict] = []
        self.release = threading.Event()
        self.on_hang = None
        methods = ("GET", "POST", "PUT", "DELETE", "HEAD", "PATCH")
        self.port = stand_in(self.answer, http11=True, methods=methods).port
        self.other_port = stand_in(self.answer, http11=True, methods=methods).port

    def answer(self, request: Request) -> Reply:
        self.seen.append(
            {
                "method": request.method,
                "path": request.path,
                "body": request.body,
                "headers": request.headers,
            }  # fmt: skip
        )
        path = request.route
        if path.startswith("/item/"):
            data = {"data": {"id": path[6:], "status": "READY",
                             "auth": request.header("Authorization", "")},
                    "query": request.query,
                    "sent": json.loads(request.body) if request.body else None}  # fmt: skip
            return json_reply(data)
        if path == "/text":
            return Reply(200, b"plain words\n", "text/plain; charset=utf-8")
        if path == "/report.pdf":
            return Reply(200, b"%PDF-1.4 " + bytes(range(256)) * 4, "application/pdf")
        if path == "/huge":
            size, chunk = 11 * 1024 * 1024, b"x" * 65536
            chunks = (chunk for _ in range(size // len(chunk)))
            return Reply(200, chunks, "application/octet-stream", length=size)
        if path == "/slow":
            return Reply(200, self._slow_loris(), "text/plain", length=1000000)
        if path == "/loop":
            return Reply(302, b"", "text/plain", {"Location": "/loop"})
        if path == "/elsewhere":
            target = f"http://127.0.0.1:{self.other_port}/item/moved"
            return Reply(302, b"", "text/plain", {"Location": target})
        if path == "/busy":
            if sum(1 for s in self.seen if s["path"].startswith("/busy")) < 2:
                return Reply(503, b"busy", "text/plain", {"Retry-After": "0"})
            return Reply(200, b'{"data": {"id": "ok"}}', "application/json")
        if path == "/hang":
            if self.on_hang is not None:
                self.on_hang()
            self.release.wait(60)
            return Reply(200, b"{}", "application/json")
        return Reply(404, b"nope", "text/plain")

    def _slow_loris(self) -> Iterator[bytes]:
        """One byte at a time, never done until released."""
        while not self.release.wait(0.2):
            yield b"x"

    def close(self) -> None:
        self.release.set()


@pytest.fixture
def server(settings, stand_in) -> Iterator[Server]:
    srv = Server(stand_in)
    # The console itself is console.test here: 127.0.0.1 is a provider the admin allowed.
    settings.ALLOWED_HOSTS = ["console.test"]
    settings.TOOL_NETWORK_ALLOW = f"127.0.0.1:{srv.port}"
    yield srv
    srv.close()


def toolmd(server: Server, request: str, *, inputs: str = "", outputs: str = "",
           integrations: str = "", timeout: int = 60) -> str:  # fmt: skip
    return (
        "---\nname: fetcher\ndescription: Calls a local API.\nkind: http\n"
        f"timeout: {timeout}\n{integrations}"
        + (f"inputs:\n{inputs}" if inputs else "")
        + f"request:\n{request}"
        + (f"outputs:\n{outputs}" if outputs else "")
        + "---\n# Fetcher\n"
    ).replace("BASE", f"http://127.0.0.1:{server.port}")


def make(text: str, *, publish: bool = True) -> Tool:
    files = {"TOOL.md": text.encode(), "samples/item.json": json.dumps(SAMPLE).encode()}
    save_version("fetcher", files, actor=Actor.system(), publish=publish)
    return Tool.objects.get(name="fetcher")


def run_of(tool: Tool, params: dict, *, actor=None, draft: bool = False) -> Run:
    version = tool.versions.order_by("-number").first() if draft else tool.published_version
    run = start.start_run(
        version, params, actor=actor or Actor.system(), via=RunVia.BROWSER, enqueue=False
    )
    return run_execute.execute_run(run.pk)


ITEM = """  method: GET
  url: BASE/item/{{item_id}}
  query: {fields: "{{fields}}", fixed: "a b&c"}
"""
ITEM_INPUTS = """  item_id: {type: string, description: Item}
  fields: {type: string, description: Fields, optional: true}
"""
ITEM_OUTPUTS = """  id: {type: string, path: data.id}
  status: {type: string, path: data.status}
"""

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_maps_outputs_into_text_and_structured_content(server) -> None:
    tool = make(toolmd(server, ITEM, inputs=ITEM_INPUTS, outputs=ITEM_OUTPUTS))
    run = run_of(tool, {"item_id": "a/../b c"})

    assert run.status == RunStatus.SUCCEEDED, run.result
    assert run.result["structuredContent"] == {"id": "a%2F..%2Fb%20c", "status": "READY"}
    assert json.loads(run.result["content"][0]["text"]) == run.result["structuredContent"]
    # The input stayed inside its path segment; the optional param was left out.
    assert server.seen[0]["path"] == "/item/a%2F..%2Fb%20c?fixed=a+b%26c"
    assert run.updates.exists()


def test_it_builds_a_json_body_on_the_structure(server) -> None:
    request = """  method: POST
  url: BASE/item/new
  body: {input: "{{extra}}", name: "n-{{name}}", n: 3}
"""
    inputs = """  extra: {type: json, description: Extra}
  name: {type: string, description: Name}
"""
    tool = make(toolmd(server, request, inputs=inputs))
    evil = '", "admin": true, "x": "'
    run = run_of(tool, {"extra": {"k": [1, None]}, "name": evil})

    assert run.status == RunStatus.SUCCEEDED, run.result
    sent = json.loads(server.seen[0]["body"])
    assert sent == {"input": {"k": [1, None]}, "name": "n-" + evil, "n": 3}
    assert server.seen[0]["headers"]["Content-Type"] == "application/json"


def test_it_returns_text_and_makes_binary_an_artifact(server) -> None:
    tool = make(toolmd(server, "  url: BASE/text\n  response: text\n"))
    assert run_of(tool, {}).result["content"][0]["text"] == "plain words\n"

    Tool.objects.all().delete()
    tool = make(toolmd(server, "  url: BASE/report.pdf\n  response: binary\n"))
    run = run_of(tool, {})
    assert run.status == RunStatus.SUCCEEDED, run.result
    artifact = RunArtifact.objects.get(run=run)
    assert artifact.name == "report.pdf" and artifact.size == 9 + 1024
    assert "artifact report.pdf" in run.result["content"][0]["text"]


def test_it_refuses_a_body_over_10_mib_while_reading(server) -> None:
    tool = make(toolmd(server, "  url: BASE/huge\n  response: binary\n"))
    run = run_of(tool, {})
    assert run.status == RunStatus.FAILED
    assert "larger than 10 MiB" in run.result["content"][0]["text"]
    assert not RunArtifact.objects.filter(run=run).exists()


def test_it_times_out_a_slow_loris_server(server) -> None:
    tool = make(toolmd(server, "  url: BASE/slow\n  response: text\n  timeout: 1\n"))
    run = run_of(tool, {})
    assert run.status == RunStatus.TIMED_OUT, run.result
    assert run.result["isError"]


def test_it_stops_a_redirect_loop(server) -> None:
    tool = make(toolmd(server, "  url: BASE/loop\n  response: text\n"))
    run = run_of(tool, {})
    assert run.status == RunStatus.FAILED
    assert "more than 5 redirects" in run.result["content"][0]["text"]


def test_it_refuses_a_redirect_to_a_loopback_port_not_allowed(server) -> None:
    tool = make(toolmd(server, "  url: BASE/elsewhere\n  response: text\n"))
    run = run_of(tool, {})
    assert run.status == RunStatus.FAILED
    assert "refused by the egress policy" in run.result["content"][0]["text"]
    assert all(s["path"] != "/item/moved" for s in server.seen)


def test_it_retries_get_on_503_and_never_post(server) -> None:
    tool = make(
        toolmd(server, "  url: BASE/busy\n", outputs="  id: {type: string, path: data.id}\n")
    )
    SAMPLE["body"]["data"]["id"] = "x"
    run = run_of(tool, {})
    assert run.status == RunStatus.SUCCEEDED, run.result
    assert [s["method"] for s in server.seen] == ["GET", "GET"]  # 503, then 200

    server.seen.clear()
    Tool.objects.all().delete()
    tool = make(toolmd(server, "  method: POST\n  url: BASE/busy\n  body: {a: 1}\n"))
    run = run_of(tool, {})
    assert run.status == RunStatus.FAILED
    assert "HTTP 503" in run.result["content"][0]["text"]
    assert [s["method"] for s in server.seen] == ["POST"]


def test_it_honours_retry_after_up_to_a_cap() -> None:
    from tools_app.egress import client as http_client

    def result(value: str) -> http_client.HttpResult:
        return http_client.HttpResult(503, "", {"retry-after": value}, b"", False, "", 0.0)

    assert http_execute._retry_delay(result("7"), 0) == 7
    assert http_execute._retry_delay(result("86400"), 0) == http_execute.RETRY_AFTER_CAP
    assert http_execute._retry_delay(result(""), 1) == 2 * http_execute.RETRY_BACKOFF


def test_it_cancels_a_request_in_flight(server) -> None:
    tool = make(toolmd(server, "  url: BASE/hang\n  response: text\n", timeout=120))
    run = start.start_run(tool.published_version, {}, actor=Actor.system(), via="browser",
                         enqueue=False)  # fmt: skip
    server.on_hang = lambda: Run.objects.filter(pk=run.pk).update(cancel_requested=True)
    done: list[Run] = []
    thread = threading.Thread(target=lambda: done.append(run_execute.execute_run(run.pk)))
    thread.start()
    thread.join(60)  # a liveness bound: without the abort it waits for the server (60 s)
    assert not server.release.is_set()
    assert done and done[0].status == RunStatus.CANCELLED, done
    assert "in flight" in done[0].result["content"][0]["text"]


@pytest.fixture
def apify(fernet_keys, server):  # noqa: F811
    fernet_keys("A")
    return create_integration("apify", "apify", actor=Actor.system(), secrets={"token": TOKEN})


AUTH = '  url: BASE/item/me\n  headers: {Authorization: "Bearer {{apify.APIFY_TOKEN}}"}\n'


def test_it_redacts_an_integration_secret_from_the_result(server, apify) -> None:
    tool = make(
        toolmd(
            server,
            AUTH,
            integrations="integrations: [apify]\n",
            outputs="  auth: {type: string, path: data.auth}\n",
        )  # fmt: skip
    )
    run = run_of(tool, {})
    assert run.status == RunStatus.SUCCEEDED, run.result
    assert server.seen[0]["headers"]["Authorization"] == f"Bearer {TOKEN}"
    assert TOKEN not in json.dumps(run.result)
    assert run.result["structuredContent"]["auth"] == "Bearer {{apify.token}}"


def test_it_fills_a_hidden_input_from_the_integration(server, apify) -> None:
    text = toolmd(
        server,
        "  url: BASE/item/{{token}}\n  response: text\n",
        integrations="integrations: [apify]\n",
        inputs="  token: {type: string, description: Token, visibility: hidden}\n",
    )
    run = run_of(make(text), {})
    assert run.status == RunStatus.SUCCEEDED, run.result
    assert server.seen[0]["path"] == f"/item/{TOKEN}"
    assert TOKEN not in json.dumps(run.result)


def test_it_withholds_an_integration_from_a_developers_draft(server, apify, developer) -> None:
    text = toolmd(server, AUTH, integrations="integrations: [apify]\n")
    tool = make(text, publish=False)
    run = run_of(tool, {}, actor=Actor(user=developer), draft=True)
    assert run.status == RunStatus.FAILED
    assert "'apify' was withheld" in run.result["content"][0]["text"]
    assert server.seen == []


def test_it_runs_through_the_celery_worker(settings, tmp_path, stand_in) -> None:
    """The real path: start_run queues the task; a worker process (its own settings from
    its environment) makes the request and stores the outcome."""
    import uuid

    from cryptography.fernet import Fernet

    from tests.support.worker import (
        REDIS_URL,
        CeleryWorker,
        _configure_publisher,
        redis_reachable,
        skip_or_fail,
        wait_for_run,
        worker_database_url,
    )

    database_url = worker_database_url()
    if database_url is None:
        skip_or_fail("the worker needs a file or PostgreSQL test database")
    srv = Server(stand_in)
    allow = f"127.0.0.1:{srv.port}"
    settings.ALLOWED_HOSTS = ["console.test"]
    settings.TOOL_NETWORK_ALLOW = allow
    worker = CeleryWorker(
        root=tmp_path / "worker",
        broker_url=REDIS_URL if redis_reachable() else "filesystem://",
        queue=f"test-http-{uuid.uuid4().hex[:8]}",
        database_url=database_url,
        encryption_key=Fernet.generate_key().decode(),
        concurrency=1,
        extra_env={"CONSOLE_TOOL_NETWORK_ALLOW": allow, "CONSOLE_ALLOWED_HOSTS": "console.test"},
    )
    settings.CONSOLE_ENCRYPTION_KEYS = [worker.encryption_key]
    undo = _configure_publisher(worker)
    worker.start()
    try:
        tool = make(toolmd(srv, ITEM, inputs=ITEM_INPUTS, outputs=ITEM_OUTPUTS))
        run = start.start_run(
            tool.published_version, {"item_id": "w1"}, actor=Actor.system(), via=RunVia.API
        )
        run = wait_for_run(run.pk, (RunStatus.SUCCEEDED, RunStatus.FAILED), worker=worker)
        assert run.status == RunStatus.SUCCEEDED, run.result
        assert run.result["structuredContent"] == {"id": "w1", "status": "READY"}
        assert run.worker  # a worker process claimed it
    finally:
        worker.stop()
        undo()
        srv.close()


def test_it_never_expands_templates_inside_an_input(server, apify) -> None:
    """An input holding `{{apify.APIFY_TOKEN}}` is sent as that text, not as the secret."""
    text = toolmd(
        server,
        '  url: BASE/item/{{item_id}}\n  body: {q: "x-{{item_id}}"}\n  method: POST\n'
        '  headers: {Authorization: "Bearer {{apify.APIFY_TOKEN}}"}\n  response: text\n',
        integrations="integrations: [apify]\n",
        inputs="  item_id: {type: string, description: Item}\n",
    )
    run = run_of(make(text), {"item_id": "{{apify.APIFY_TOKEN}}"})
    assert run.status == RunStatus.SUCCEEDED, run.result
    seen = server.seen[0]
    assert TOKEN not in seen["path"] and TOKEN not in seen["body"].decode()
    assert json.loads(seen["body"]) == {"q": "x-{{apify.APIFY_TOKEN}}"}


def test_it_refuses_a_header_split_by_an_input(server) -> None:
    text = toolmd(
        server,
        '  url: BASE/item/x\n  headers: {X-Note: "{{note}}"}\n  response: text\n',
        inputs="  note: {type: string, description: Note}\n",
    )
    run = run_of(make(text), {"note": "hi\r\nX-Admin: yes"})
    assert run.status == RunStatus.FAILED
    assert all("X-Admin" not in s["headers"] for s in server.seen)
    assert "header X-Note: a filled-in value holds a line break" in str(run.result)
    assert "X-Admin" not in str(run.result)


def test_it_runs_from_the_run_form_without_asking_for_hidden_inputs(
    server, apify, console_admin, settings
) -> None:
    from django.test import Client

    settings.ALLOWED_HOSTS = ["console.test", "testserver"]
    text = toolmd(
        server,
        '  method: POST\n  url: BASE/item/{{token}}\n  body: {extra: "{{extra}}"}\n'
        "  response: text\n",
        integrations="integrations: [apify]\n",
        inputs="  token: {type: string, description: Token, visibility: hidden}\n"
        "  extra: {type: json, description: Extra}\n",
    )
    make(text)
    client = Client()
    client.force_login(console_admin)
    page = client.get("/tools/fetcher/run/").content.decode()
    assert 'name="extra"' in page and 'name="token"' not in page

    submit(client, "/tools/fetcher/run/", {"extra": '{"a": [1, 2]}'}, form_id="run-form")

    run = Run.objects.get()
    assert run.params == {"extra": {"a": [1, 2]}}


# --- List inputs in the query: the key repeats per item ---------------------------------

LIST_QUERY = '  url: BASE/item/x\n  query: {id: "{{ids}}", tag: "{{tags}}", fixed: "k"}\n'
LIST_INPUTS = """  ids: {type: "integer[]", description: Ids, optional: true}
  tags: {type: "string[]", description: Tags, optional: true}
"""


def _query(server: Server, index: int = -1) -> str:
    return server.seen[index]["path"].partition("?")[2]


def test_it_repeats_a_query_key_for_each_item_of_a_list_input(server) -> None:
    tool = make(toolmd(server, LIST_QUERY, inputs=LIST_INPUTS, outputs=ITEM_OUTPUTS))

    run = run_of(tool, {"ids": [1, 2], "tags": ["a b", "c&d"]})
    assert run.status == RunStatus.SUCCEEDED, run.result
    assert _query(server) == "id=1&id=2&tag=a+b&tag=c%26d&fixed=k"
    # An empty list is left out like an optional input not given.
    assert run_of(tool, {"ids": [], "tags": ["x"]}).status == RunStatus.SUCCEEDED
    assert _query(server) == "tag=x&fixed=k"
    assert run_of(tool, {}).status == RunStatus.SUCCEEDED
    assert _query(server) == "fixed=k"


def test_it_refuses_structured_items_for_a_repeated_query_key(server) -> None:
    from tools_app.manifest import schema

    inputs = "  ids: {type: json, description: Ids}\n"
    tool = make(toolmd(server, LIST_QUERY.replace(', tag: "{{tags}}"', ""), inputs=inputs))
    run = run_of(tool, {"ids": [1, {"a": 1}]})
    assert run.status == RunStatus.FAILED
    assert "query parameter id: {{ids}} is a list of objects or lists" in str(run.result)
    assert server.seen == []  # nothing was sent
    typed = make(toolmd(server, LIST_QUERY, inputs=LIST_INPUTS))
    manifest = toolmd_of(typed)
    _params, errors = schema.validate_params(manifest, {"ids": [1, {"a": 1}], "tags": "x"})
    assert errors == ["ids.1: {'a': 1} is not of type 'integer'", "tags: must be an array of "
                      "string values, got a string"]  # fmt: skip
    numbers = toolmd_module_spec("number[]")
    _params, errors = schema.validate_params(numbers, {"n": [1.5, float("inf")]})
    assert errors == ["n.1: must be a finite number"]  # PostgreSQL's JSON refuses Infinity


def toolmd_module_spec(type_: str):
    from tools_app.manifest import inputs as manifest_inputs
    from tools_app.manifest import toolmd as manifest_toolmd

    spec = manifest_inputs.InputSpec(name="n", type=type_, description="N")
    return manifest_toolmd.Manifest(name="n", label="", description="", inputs={"n": spec})


def toolmd_of(tool: Tool):
    from tools_app.manifest.folder import validate_files

    files = tool.versions.order_by("-number").first().file_bytes()
    return validate_files(files, "fetcher/TOOL.md", context=validation_context()).manifest


def test_it_takes_list_inputs_from_the_api_and_the_run_form(
    server, console_admin, settings, django_capture_on_commit_callbacks, monkeypatch
) -> None:
    from django.test import Client

    from tests.support.agent_api import agent_client

    settings.ALLOWED_HOSTS = ["console.test", "testserver"]
    make(toolmd(server, LIST_QUERY, inputs=LIST_INPUTS, outputs=ITEM_OUTPUTS))
    api = agent_client("tools:invoke")
    url = "/api/v1/tools/fetcher/invoke"
    bad = api.post(url, {"params": {"ids": [{"a": 1}]}}, content_type="application/json")
    assert bad.status_code == 422
    assert bad.json()["detail"] == ["ids.0: {'a': 1} is not of type 'integer'"]
    # This test runs the run itself: no message may reach a worker another test started.
    monkeypatch.setattr(start, "enqueue_run", lambda run_id: None)
    with django_capture_on_commit_callbacks(execute=False):
        response = api.post(url, {"params": {"ids": [3, 4]}}, content_type="application/json")
    assert response.status_code == 202, response.content
    run_id = response.json()["run"]
    run = run_execute.execute_run(run_id)
    assert run is not None, Run.objects.filter(pk=run_id).values("status", "worker", "error")
    assert run.status == RunStatus.SUCCEEDED, run.result
    assert _query(server) == "id=3&id=4&fixed=k"

    client = Client()
    client.force_login(console_admin)
    page = client.get("/tools/fetcher/run/").content.decode()
    assert "One integer per line." in page
    response = submit(client, "/tools/fetcher/run/", {"ids": "5\nnope\n", "tags": ""},
                      form_id="run-form")  # fmt: skip
    assert "line 2: must be an integer, one item per line." in response.content.decode()
    with django_capture_on_commit_callbacks(execute=False):
        changes = {"ids": "5\n\n6\n", "tags": "red\nblue green\n"}
        submit(client, "/tools/fetcher/run/", changes, form_id="run-form")
    run = Run.objects.order_by("-created_at").first()
    assert run.params == {"ids": [5, 6], "tags": ["red", "blue green"]}


def test_it_redacts_each_item_of_a_sensitive_list_input(server) -> None:
    inputs = '  keys: {type: "string[]", description: Keys, sensitive: true}\n'
    tool = make(toolmd(server, '  url: BASE/item/x\n  query: {key: "{{keys}}"}\n', inputs=inputs))
    run = run_of(tool, {"keys": ["k3y-alpha-1", "k3y-beta-22"]})  # the API echoes its query
    assert run.status == RunStatus.SUCCEEDED, run.result
    assert _query(server) == "key=k3y-alpha-1&key=k3y-beta-22"
    stored = json.dumps(Run.objects.get(pk=run.pk).result)
    assert "k3y-alpha-1" not in stored and "k3y-beta-22" not in stored
    assert "key={{input.keys.0}}&key={{input.keys.1}}" in stored


def test_it_leaves_an_optional_body_member_out_when_it_is_not_given(server) -> None:
    """As a query parameter is: an API may refuse a null it did not ask for."""
    request = """  method: POST
  url: BASE/item/new
  body: {name: "{{name}}", tag: "{{tag}}", nested: {tag: "{{tag}}"}}
"""
    inputs = """  name: {type: string, description: Name}
  tag: {type: string, description: Tag, optional: true}
"""
    tool = make(toolmd(server, request, inputs=inputs))

    without = run_of(tool, {"name": "Rex"})
    given = run_of(tool, {"name": "Rex", "tag": "dog"})

    assert without.status == given.status == RunStatus.SUCCEEDED, without.result
    assert json.loads(server.seen[0]["body"]) == {"name": "Rex", "nested": {}}
    assert json.loads(server.seen[1]["body"]) == {
        "name": "Rex",
        "tag": "dog",
        "nested": {"tag": "dog"},
    }
