"""Code tools' structured results (issue 29) end to end: a JavaScript, a TypeScript and a
Python tool declare `outputs` and return `structuredContent`, which reaches REST, MCP
(checked by the official SDK's client against the listed outputSchema) and the python shim;
a result that does not match is a clear tool error; progress with `total` reaches MCP's
progress notifications. A live console and a real Celery worker."""

from __future__ import annotations

import json
import subprocess

import httpx
import pytest

from tests.api.test_mcp import mcp_call, token
from tests.support import tool_files
from tests.support.sync_client import write_signed_tool
from tests.support.worker import CeleryWorker, wait_for_run
from tools_app.audit import Actor
from tools_app.catalog.versions import save_version
from tools_app.manifest.toolmd import parse_toolmd
from tools_app.models.runs import FINISHED, RunStatus
from tools_app.runner.sandbox import node_executable

SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"  # the shim runs python3 from the host
pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

OUTPUTS = {
    "total": {"type": "integer", "description": "How many there are."},
    "names": {"type": "json", "description": "Their names."},
    "note": {"type": "string", "nullable": True},
}
INPUTS = {"n": {"type": "integer", "description": "How many."}}
SOURCES = {
    "javascript": """
export async function execute(toolCallId, params, signal, onUpdate) {
  for (let i = 1; i <= 3; i++) onUpdate({progress: i, total: 3, message: `step ${i}`});
  const names = Array.from({length: params.n}, (_, i) => `n${i}`);
  return {content: [{type: "text", text: names.join(",")}],
          structuredContent: {total: params.n, names, note: null}};
}
""",
    "typescript": """
type Params = {n: number};
export async function execute(toolCallId: string, params: Params) {
  const names: string[] = Array.from({length: params.n}, (_, i) => `n${i}`);
  return {content: [{type: "text" as const, text: names.join(",")}],
          structuredContent: {total: params.n, names, note: "typed"}};
}
""",
    "python": """
def execute(tool_call_id, params, signal, on_update):
    for i in range(1, 4):
        on_update({"progress": i, "total": 3, "message": None if i == 2 else f"py {i}"})
    names = [f"n{i}" for i in range(params["n"])]
    return {"content": [{"type": "text", "text": ",".join(names)}],
            "structuredContent": {"total": params["n"], "names": names}}
""",
}
LIAR = """
export async function execute(toolCallId, params) {
  return {content: [{type: "text", text: "two"}], structuredContent: {total: "two", names: []}};
}
"""


def publish(name: str, language: str, source: str) -> None:
    files = tool_files(name, language, source, inputs=INPUTS, extra={"outputs": OUTPUTS})
    save_version(name, files, actor=Actor.system(), publish=True)


@pytest.fixture
def tools(console_url: str, worker: CeleryWorker) -> str:
    for language, source in SOURCES.items():
        publish(f"count_{language}", language, source)
    publish("liar", "javascript", LIAR)
    return console_url


def rest_run(url: str, raw: str, name: str, params: dict, worker: CeleryWorker) -> dict:
    headers = {"Authorization": f"Bearer {raw}"}
    answer = httpx.post(
        f"{url}/api/v1/tools/{name}/invoke", json={"params": params}, headers=headers, timeout=30
    )
    assert answer.status_code == 202, answer.text
    run_id = answer.json()["run"]
    wait_for_run(run_id, FINISHED, worker=worker)
    return httpx.get(f"{url}/api/v1/runs/{run_id}", headers=headers, timeout=30).json()


def test_it_passes_structured_content_through_rest(tools: str, worker: CeleryWorker) -> None:
    _, raw = token()
    for language in SOURCES:
        run = rest_run(tools, raw, f"count_{language}", {"n": 2}, worker)
        assert run["status"] == RunStatus.SUCCEEDED, run
        structured = run["result"]["structuredContent"]
        assert structured["total"] == 2 and structured["names"] == ["n0", "n1"], language
    listed = httpx.get(
        f"{tools}/api/v1/registry", headers={"Authorization": f"Bearer {raw}"}, timeout=30
    ).json()
    entry = next(tool for tool in listed["tools"] if tool["name"] == "count_python")
    assert entry["output_schema"]["required"] == ["total", "names"]

    run = rest_run(tools, raw, "liar", {"n": 1}, worker)
    assert run["status"] == RunStatus.FAILED
    assert "structuredContent" not in run["result"]
    assert run["result"]["content"][0]["text"] == (
        "The tool's structuredContent does not match its outputs: total: expected integer, "
        "got a string."
    )


def test_the_sdk_client_takes_structured_content_with_progress(tools: str) -> None:
    _, raw = token()
    seen: list[tuple[float, float | None, str | None]] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append((value, total, message))

    async def go(client):
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        calls = {
            language: await client.call_tool(
                f"count_{language}", {"n": 3}, progress_callback=progress
            )
            for language in SOURCES
        }
        return listed, calls, await client.call_tool("liar", {"n": 1})

    listed, calls, liar = mcp_call(tools, raw, go)

    schema = listed["count_typescript"].output_schema
    assert schema["required"] == ["total", "names"]
    assert schema["additionalProperties"] is False
    for language, result in calls.items():
        # The SDK raises when structuredContent does not match the listed outputSchema.
        assert result.is_error is False, (language, result)
        assert result.structured_content["names"] == ["n0", "n1", "n2"]
    assert calls["typescript"].structured_content["note"] == "typed"
    assert (1, 3, "step 1") in seen and (3, 3, "step 3") in seen  # javascript
    assert (2, 3, None) in seen and (3, 3, "py 3") in seen  # python
    assert liar.is_error is True
    assert liar.structured_content is None
    assert "does not match its outputs" in liar.content[0].text


def test_the_python_shim_passes_structured_content_and_progress_on(tmp_path) -> None:
    files = tool_files(
        "count_python", "python", SOURCES["python"], inputs=INPUTS, extra={"outputs": OUTPUTS}
    )
    manifest = parse_toolmd(files["TOOL.md"].decode(), "TOOL.md").manifest.to_dict()
    folder = write_signed_tool(tmp_path, manifest, files)  # the shim checks its signature
    script = f"""
        import {{execute}} from {json.dumps(str(folder / "index.js"))};
        const updates = [];
        const result = await execute("call-1", {{n: 2}}, undefined, (u) => updates.push(u));
        console.log(JSON.stringify({{result, updates}}));
    """
    done = subprocess.run(
        [str(node_executable()), "--input-type=module", "-e", script],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": SYSTEM_PATH},
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["result"]["structuredContent"] == {"total": 2, "names": ["n0", "n1"]}
    assert [(u["progress"], u["total"]) for u in out["updates"]] == [(1, 3), (2, 3), (3, 3)]
