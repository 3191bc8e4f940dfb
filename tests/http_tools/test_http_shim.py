"""The generated index.js of kind: http tools (tools_app/catalog/shim,
index.http.template.js) end to end: a live console (gunicorn) with a real Celery worker, a
local server standing in for the tool's provider, the tool mirrored into DATA_PATH/tools
and loaded by a Node loader written from the seed's rules only (tests/data/seed_loader.mjs).
The index.js invokes the tool through the agent API, so the integration's secret stays in
the console."""

from __future__ import annotations

import io
import json
import socket
import subprocess
import threading
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support import REPO
from tests.support.stand_in import Reply, Request, json_reply
from tests.support.sync_client import write_signed_tool
from tests.support.worker import CeleryWorker
from tools_app.audit import Actor
from tools_app.catalog import bundle, datapath, shim
from tools_app.catalog.versions import save_version, set_enabled
from tools_app.integrations.service import create_integration
from tools_app.manifest.toolmd import parse_toolmd
from tools_app.models import AuditEvent, Run, Tool
from tools_app.models.runs import RunStatus, RunVia
from tools_app.models.tokens import AgentToken, Scope
from tools_app.runner.sandbox import node_executable

LOADER = REPO / "tests" / "data" / "seed_loader.mjs"
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"
CANARY = "canary-shim-8c41f07d2b9e5a63"  # the integration's secret: never outside the console


class Provider:
    """Stands in for the http tool's API: /item/<id> answers JSON (echoing the bearer
    token it was sent, which the console must redact); /slow answers only once released."""

    def __init__(self, stand_in) -> None:
        self.seen: list[dict] = []
        self.release = threading.Event()
        # Another loopback address than the console's own 127.0.0.1 (a tool never calls
        # back into the console).
        self.base = stand_in(self.answer, host="127.0.0.2", methods=("GET",)).url

    def answer(self, request: Request) -> Reply:
        auth = request.header("Authorization", "")
        self.seen.append({"path": request.path, "auth": auth})
        if request.path == "/slow":
            self.release.wait(60)
        item = request.path.rsplit("/", 1)[-1]
        return json_reply({"data": {"id": item, "echo": auth}})

    def close(self) -> None:
        self.release.set()


@pytest.fixture
def live(console_url: str, worker: CeleryWorker) -> str:
    return console_url


@pytest.fixture
def provider(worker: CeleryWorker, stand_in) -> Iterator[Provider]:
    api = Provider(stand_in)
    # The egress policy lets a tool reach the URL fields of the integrations it declares.
    create_integration(
        "shimitems",
        "custom",
        actor=Actor.system(),
        values={"items_url": api.base},
        secrets={"items_token": CANARY},
        custom_fields="ITEMS_URL url\nITEMS_TOKEN secret required",
    )
    yield api
    api.close()


def publish_http_tool(name: str, url: str) -> None:
    text = (
        f"---\nname: {name}\ndescription: Reads an item from the stand-in API.\nkind: http\n"
        "integrations: [shimitems]\ntimeout: 60\n"
        "inputs:\n  item: {type: string, description: The item's id.}\n"
        f"request:\n  method: GET\n  url: {url}\n"
        '  headers: {Authorization: "Bearer {{shimitems.ITEMS_TOKEN}}"}\n'
        "---\n# Item\n"
    )
    save_version(name, {"TOOL.md": text.encode()}, actor=Actor.system(), publish=True)


@pytest.fixture
def tools_dir(provider: Provider, tmp_path: Path) -> Path:
    publish_http_tool("shim_item", provider.base + "/item/{{item}}")
    publish_http_tool("shim_slow", provider.base + "/slow")
    # Publishing mirrors into DATA_PATH/tools already; this says so.
    data_path = tmp_path / "data"
    for name in ("shim_item", "shim_slow"):
        assert datapath.mirror_tool(name, data_path).action in ("written", "unchanged")
    return datapath.tools_dir(data_path)


@pytest.fixture
def invoker(db) -> tuple[AgentToken, str]:
    return AgentToken.issue("shim-agent", [Scope.TOOLS_INVOKE])


def loader(tools: Path, *args: str, env: dict[str, str]) -> list[dict]:
    done = subprocess.run(
        [node_executable(), "--disable-warning=ExperimentalWarning", str(LOADER), *args],
        env={"PATH": SYSTEM_PATH, "PI_TOOLS_DIRS": str(tools), **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert CANARY not in done.stdout + done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def call(tools: Path, name: str, params: dict, env: dict[str, str], abort_on: str = "") -> dict:
    """The loader's events of one call: updates (texts) and the result or what was thrown."""
    extra = ["--abort-on", abort_on] if abort_on else []
    events = loader(tools, "call", name, json.dumps(params), *extra, env=env)
    (last,) = [e for e in events if "result" in e or "thrown" in e]
    return {"updates": [e["update"] for e in events if "update" in e], **last}


def text(result: dict) -> str:
    return "\n".join(block["text"] for block in result["content"])


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_it_runs_an_http_tool_in_the_console_from_a_seed_rules_loader(
    live, provider, tools_dir, invoker
):
    token, raw = invoker
    (listing,) = loader(tools_dir, "list", env={})
    assert listing["tools"] == ["shim_item", "shim_slow"]

    env = {"CONSOLE_URL": live + "/", "CONSOLE_TOKEN": raw}
    got = call(tools_dir, "shim_item", {"item": "w1"}, env)

    assert "result" in got, got
    result = got["result"]
    assert result["isError"] is False, result
    data = json.loads(text(result))["data"]
    assert data["id"] == "w1"
    assert data["echo"].startswith("Bearer ") and CANARY not in data["echo"]  # redacted
    assert result["structuredContent"]["data"]["id"] == "w1"
    # The console made the request, with the secret the loader never saw.
    assert provider.seen == [{"path": "/item/w1", "auth": f"Bearer {CANARY}"}]
    assert got["updates"] == [f"GET {provider.base}/item/w1 (attempt 1)"]
    run = Run.objects.get()
    assert (run.via, run.token, run.status) == (RunVia.API, token, RunStatus.SUCCEEDED)
    assert run.params == {"item": "w1"}


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_it_cancels_the_run_when_the_signal_aborts(live, provider, tools_dir, invoker):
    _, raw = invoker
    env = {"CONSOLE_URL": live, "CONSOLE_TOKEN": raw}
    got = call(tools_dir, "shim_slow", {"item": "x"}, env, abort_on="(attempt 1)")

    assert got["updates"] == [f"GET {provider.base}/slow (attempt 1)"]
    assert "result" in got, got
    result = got["result"]
    assert result["isError"] is True
    assert "Cancelled" in text(result), result
    run = Run.objects.get()
    assert run.status == RunStatus.CANCELLED and run.cancel_requested
    assert AuditEvent.objects.filter(action="run.cancel", actor="token:shim-agent").exists()


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_it_throws_a_clear_error_when_the_call_cannot_be_made(live, provider, tools_dir):
    def thrown(env: dict[str, str], params: dict | None = None, name: str = "shim_item") -> str:
        got = call(tools_dir, name, {"item": "w2"} if params is None else params, env)
        assert "result" not in got, got
        return got["thrown"]

    _, reader = AgentToken.issue("reader", [Scope.REGISTRY_READ, Scope.SYNC_READ])
    _, invoker = AgentToken.issue("invoker", [Scope.TOOLS_INVOKE])
    assert "set CONSOLE_TOKEN to an agent token with the scope tools:invoke" in thrown(
        {"CONSOLE_URL": live}
    )
    assert "set CONSOLE_URL" in thrown({"CONSOLE_TOKEN": invoker})
    bad_url = {"CONSOLE_URL": "console.example.com", "CONSOLE_TOKEN": invoker}
    assert "must be an http(s):// URL" in thrown(bad_url)

    message = thrown({"CONSOLE_URL": live, "CONSOLE_TOKEN": "tc_not-a-token"})
    assert "HTTP 401" in message and "not a valid agent token" in message
    message = thrown({"CONSOLE_URL": live, "CONSOLE_TOKEN": reader})
    assert "HTTP 403" in message and "lacks the scope tools:invoke" in message
    message = thrown({"CONSOLE_URL": f"http://127.0.0.1:{closed_port()}", "CONSOLE_TOKEN": invoker})
    assert "could not be reached" in message

    good = {"CONSOLE_URL": live, "CONSOLE_TOKEN": invoker}
    message = thrown(good, params={"item": 3, "extra": True})
    assert "HTTP 422" in message and "item" in message and "extra" in message
    set_enabled(Tool.objects.get(name="shim_item"), False, actor=Actor.system())
    message = thrown(good)
    assert "HTTP 404" in message and "no published, enabled tool named shim_item" in message
    assert not Run.objects.exists() and provider.seen == []


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_it_mirrors_the_same_secret_free_index_js_to_data_path_and_sync(live, tools_dir):
    tool = Tool.objects.get(name="shim_item")
    folder = tools_dir / "shim_item"
    for path in tools_dir.parent.rglob("*"):
        if path.is_file():
            assert CANARY.encode() not in path.read_bytes(), path
    index = (folder / "index.js").read_bytes()
    assert index == shim.render(tool.published_version.manifest)
    config = json.loads(index.decode().split("const TOOL = ", 1)[1].split(";\n", 1)[0])
    assert config == {"name": "shim_item", "kind": "http"}  # no URL, no integration value

    _, raw = AgentToken.issue("sync-host", [Scope.SYNC_READ])
    headers = {"Authorization": f"Bearer {raw}"}
    manifest = httpx.get(f"{live}/api/v1/sync/manifest", headers=headers).json()
    (listed,) = [t for t in manifest["tools"] if t["name"] == "shim_item"]
    files = bundle.read_tool_dir(folder)
    files.pop(datapath.MARKER)
    assert json.loads(files.pop(datapath.SIGNATURE_FILE)) == listed["signature"]
    assert listed["sha256"] == bundle.canonical_sha256(files)
    zipped = httpx.get(live + listed["bundle_url"], headers=headers)
    with zipfile.ZipFile(io.BytesIO(zipped.content)) as archive:
        assert archive.read("shim_item/index.js") == index
        assert not any(CANARY.encode() in archive.read(n) for n in archive.namelist())


# --- Against a scripted console: the answers a live one gives only by bad luck ----------


class ScriptedConsole:
    """Answers invoke with run r1, then each GET of the run with the next scripted answer
    (a status code and JSON body; `hold` first waits a second, as a long poll would) and
    the cancel with `cancel`; records what it was asked."""

    def __init__(self, stand_in, polls: list, cancel: tuple[int, dict] = (200, {})) -> None:
        self.asked: list[tuple[str, str, str]] = []
        self.script = list(polls)
        self.cancel = cancel
        self.url = stand_in(self.answer, methods=("GET", "POST")).url

    def answer(self, request: Request) -> Reply:
        self.asked.append((request.method, request.path, request.header("Authorization")))
        if request.method == "GET":
            status, body = self.script.pop(0)
            if body.pop("hold", False):
                time.sleep(1)
            return json_reply(body, status)
        if request.path == "/moved/api/v1/tools/demo/invoke":
            return json_reply({}, 308, Location="https://elsewhere.example/")
        if request.path.endswith("/invoke"):
            return json_reply({"run": "r1", "status": "queued", "url": "/api/v1/runs/r1"}, 202)
        return json_reply(self.cancel[1], self.cancel[0])


def demo_tool(tmp_path: Path) -> Path:
    """tools/demo, signed (the index.js verifies its folder before it calls the console)."""
    toolmd = (
        b"---\nname: demo\ndescription: Demo.\nkind: http\n"
        b"request:\n  method: GET\n  url: https://api.example.com/demo\n---\n"
    )
    manifest = parse_toolmd(toolmd).manifest.to_dict()
    folder = write_signed_tool(tmp_path / "tools", manifest, {"TOOL.md": toolmd})
    assert (folder / "index.js").read_bytes() == shim.render({"name": "demo", "kind": "http"})
    return folder.parent


RUN = "/api/v1/runs/r1"


def update(seq: int, text: str) -> dict:
    return {"seq": seq, "at": "2026-01-01T00:00:00Z", "content": [{"type": "text", "text": text}]}


def test_it_follows_updates_across_polls_and_retries_a_failing_poll(tmp_path, stand_in):
    console = ScriptedConsole(
        stand_in,
        [
            (200, {"status": "running", "updates": [update(1, "one")]}),
            (503, {"error": "unavailable"}),
            (200, {"status": "running", "updates": [update(1, "one"), update(2, "two")]}),
            (200, {"status": "lost", "result": None, "error": "the worker died", "updates": []}),
        ],
    )
    env = {"CONSOLE_URL": console.url, "CONSOLE_TOKEN": "tc_demo"}
    got = call(demo_tool(tmp_path), "demo", {"q": 1}, env)
    assert got["updates"] == ["one", "two"]
    assert got["result"] == {
        "content": [
            {"type": "text", "text": "The run r1 ended lost without a result: the worker died"}
        ],
        "isError": True,
    }
    polls = [path for method, path, _ in console.asked if method == "GET"]
    assert polls == [f"/api/v1/runs/r1?wait=25&after={n}" for n in (0, 1, 1, 2)]
    assert {auth for *_, auth in console.asked} == {"Bearer tc_demo"}


def test_it_cancels_during_a_long_poll_and_returns_a_run_that_ended_meanwhile(tmp_path, stand_in):
    done = {"content": [{"type": "text", "text": "made it"}], "isError": False}
    console = ScriptedConsole(
        stand_in,
        [
            (200, {"status": "running", "updates": [update(1, "started")]}),
            (200, {"status": "running", "updates": [], "hold": True}),  # aborted meanwhile
            (200, {"status": "succeeded", "result": done, "updates": []}),
        ],
        cancel=(409, {"error": "run already ended", "detail": {"status": "succeeded"}}),
    )
    env = {"CONSOLE_URL": console.url, "CONSOLE_TOKEN": "tc_demo"}
    got = call(demo_tool(tmp_path), "demo", {}, env, abort_on="started")
    assert got["result"] == done  # the run had ended: its result, not an error
    asked = [(method, path) for method, path, _ in console.asked]
    assert asked[:2] == [("POST", "/api/v1/tools/demo/invoke"), ("GET", f"{RUN}?wait=25&after=0")]
    # The abort ended the poll in flight (whether or not it had reached the console), the
    # cancel went out, then short polls until the run ended.
    after_cancel = asked[asked.index(("POST", f"{RUN}/cancel")) + 1 :]
    assert after_cancel and set(after_cancel) == {("GET", f"{RUN}?wait=5&after=1")}


def test_it_refuses_to_follow_a_redirect_with_the_token(tmp_path, stand_in):
    console = ScriptedConsole(stand_in, [])
    env = {"CONSOLE_URL": console.url + "/moved", "CONSOLE_TOKEN": "tc_demo"}
    got = call(demo_tool(tmp_path), "demo", {}, env)
    assert "redirect (HTTP 308) to https://elsewhere.example/" in got["thrown"]
    assert "set CONSOLE_URL to the console's own base URL" in got["thrown"]
