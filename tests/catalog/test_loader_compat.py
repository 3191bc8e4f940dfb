"""Loader compatibility: every tool the console mirrors into DATA_PATH/tools loads and runs
in a Node loader written from the seed's rules only (tests/data/seed_loader.mjs), which
knows index.ts/index.js and nothing else. Python and bash tools get there through the
generated index.js (tools_app/catalog/shim), which runs them with the runner's protocol; kind: http
tools through one that runs them in the console over the agent API (a live console and
worker here; tests/http_tools/test_http_shim.py goes further)."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

from tests.seed.test_seed_tools import (  # noqa: F401 (fixtures)
    MESSAGES,
    SEARX_TOKEN,
    FakeWeb,
    _write_wav,
    fake_web,
)
from tests.support import require
from tests.support.sync_client import write_signed_tool
from tools_app.catalog import datapath, shim
from tools_app.catalog.sync import sync_tools
from tools_app.manifest.toolmd import parse_toolmd
from tools_app.models import Run
from tools_app.models.runs import RunStatus, RunVia
from tools_app.models.tokens import AgentToken, Scope
from tools_app.runner.sandbox import node_executable

REPO = Path(__file__).resolve().parents[2]
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"
LOADER = REPO / "tests" / "data" / "seed_loader.mjs"


@pytest.fixture
def mirrored(db) -> Path:
    sync_tools(seed_dir=REPO / "seed" / "tools")
    return datapath.tools_dir(settings.DATA_PATH)


def loader(tools_dir: Path, *args: str, env: dict[str, str] | None = None) -> list[dict]:
    done = subprocess.run(
        [node_executable(), "--disable-warning=ExperimentalWarning", str(LOADER), *args],
        env={"PATH": SYSTEM_PATH, "PI_TOOLS_DIRS": str(tools_dir), **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def call(tools_dir: Path, name: str, params: dict[str, Any], **kw: Any) -> tuple[list[str], dict]:
    abort_on = kw.pop("abort_on", None)
    extra = ["--abort-on", abort_on] if abort_on else []
    events = loader(tools_dir, "call", name, json.dumps(params), *extra, **kw)
    updates = [e["update"] for e in events if "update" in e]
    (result,) = [e["result"] for e in events if "result" in e]
    return updates, result


def text(result: dict) -> str:
    return "\n".join(item["text"] for item in result["content"])


HTTP_SEED_TOOLS = ("apify_get_dataset_items", "apify_get_run", "apify_run_actor")


def test_it_gives_python_bash_and_http_tools_an_index_js_and_leaves_the_others(mirrored):
    for name in ("email_db", "ocr", "convert_audio_to_mp3", *HTTP_SEED_TOOLS):
        folder = mirrored / name
        assert (folder / "index.js").read_bytes() == shim.render(_manifest(name))
    for name in ("browser", "gmail", "web_fetch", "web_search"):
        assert not (mirrored / name / "index.js").exists()
        assert (mirrored / name / "index.ts").exists()


def _manifest(name: str) -> dict:
    from tools_app.models import Tool

    return Tool.objects.get(name=name).published_version.manifest


def test_it_lets_a_seed_rules_loader_find_every_seed_tool(mirrored):
    (listing,) = loader(mirrored, "list")
    assert listing["tools"] == [
        *HTTP_SEED_TOOLS,
        "browser",
        "convert_audio_to_mp3",
        "email_db",
        "gmail",
        "ocr",
        "web_fetch",
        "web_search",
    ]


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_it_runs_the_seed_http_tools_in_the_console(console_url, worker, mirrored):
    """No apify integration is configured: the run reaches the console, which answers
    with the tool's own error naming it (the request itself is tested with a stand-in
    provider in test_http_shim.py)."""
    token, raw = AgentToken.issue("loader-host", [Scope.TOOLS_INVOKE])
    env = {"CONSOLE_URL": console_url, "CONSOLE_TOKEN": raw}
    _, result = call(mirrored, "apify_get_run", {"run_id": "HG7ML7M8z78YcAPEB"}, env=env)
    assert result["isError"] is True
    assert "integration 'apify' is not configured" in text(result)
    run = Run.objects.get()
    assert (run.tool.name, run.via, run.token) == ("apify_get_run", RunVia.API, token)
    assert run.status == RunStatus.FAILED

    (refused,) = loader(mirrored, "call", "apify_get_run", "{}", env={"CONSOLE_URL": console_url})
    assert "set CONSOLE_TOKEN" in refused["thrown"]


def test_it_runs_the_typescript_seed_tools(mirrored, fake_web: FakeWeb):  # noqa: F811
    _, fetched = call(mirrored, "web_fetch", {"url": f"{fake_web.base}/notes.txt"})
    assert fetched["isError"] is False, fetched
    assert "indented line two" in text(fetched)

    env = {"SEARXNG_URL": f"{fake_web.base}/searx/", "SEARXNG_TOKEN": SEARX_TOKEN}
    updates, found = call(mirrored, "web_search", {"query": "tool console"}, env=env)
    assert found["isError"] is False, found
    assert "1. Result number 1" in text(found)
    assert any("searching" in u for u in updates)


@pytest.fixture
def email_archive(tmp_path: Path) -> dict[str, str]:
    path = tmp_path / "email.db"
    with sqlite3.connect(path) as conn:
        conn.execute(
            "CREATE TABLE messages(id INTEGER PRIMARY KEY, sender TEXT, recipient TEXT,"
            " subject TEXT, body TEXT, sent_at TEXT)"
        )
        conn.executemany("INSERT INTO messages VALUES (?, ?, ?, ?, ?, ?)", MESSAGES)
    conn.close()
    return {"EMAIL_DB_PATH": str(path)}


def test_it_runs_the_python_seed_tool_through_the_shim(mirrored, email_archive):
    sql = "SELECT subject FROM messages ORDER BY id"
    updates, result = call(mirrored, "email_db", {"sql": sql, "format": "json"}, env=email_archive)
    assert result["isError"] is False, result
    assert json.loads(text(result))["rows"][0] == {"subject": MESSAGES[0][3]}
    assert "running query" in updates


def test_it_reports_a_python_tool_error_as_is_error(mirrored):
    _, result = call(mirrored, "email_db", {"sql": "SELECT 1"})
    assert result["isError"] is True
    assert "email_db" in text(result)  # says which integration to configure


def test_it_aborts_a_python_tool_through_the_signal(mirrored, email_archive):
    endless = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT max(i) FROM n"
    updates, result = call(
        mirrored, "email_db", {"sql": endless}, env=email_archive, abort_on="running query"
    )
    assert "running query" in updates
    assert result["isError"] is True
    assert "cancelled" in text(result)


@pytest.fixture
def ffmpeg_installed() -> None:
    require(shutil.which("ffmpeg") is None, "ffmpeg is not installed (apt-get install ffmpeg)")


@pytest.mark.usefixtures("ffmpeg_installed")
def test_it_runs_the_bash_seed_tool_with_progress_through_the_shim(mirrored, tmp_path):
    _write_wav(tmp_path / "tone.wav", seconds=2)
    output = tmp_path / "out"
    output.mkdir()
    updates, result = call(
        mirrored,
        "convert_audio_to_mp3",
        {"input_path": str(tmp_path / "tone.wav"), "bitrate": "64k"},
        env={"TOOL_OUTPUT_DIR": str(output)},
    )
    assert result["isError"] is False, result
    assert "Bitrate: 64k" in text(result)
    assert updates[0].startswith("converting tone.wav")
    assert (output / "tone.mp3").stat().st_size > 1000


@pytest.mark.usefixtures("ffmpeg_installed")
def test_it_aborts_a_bash_tool_and_its_children(mirrored, tmp_path):
    _write_wav(tmp_path / "long.wav", seconds=600, tone=False)
    output = tmp_path / "out"
    output.mkdir()
    updates, result = call(
        mirrored,
        "convert_audio_to_mp3",
        {"input_path": str(tmp_path / "long.wav")},
        env={"TOOL_OUTPUT_DIR": str(output)},
        abort_on="converting",
    )
    assert result["isError"] is True
    assert "cancelled" in text(result)
    assert list(output.iterdir()) == []  # the tool's own cancel handler ran (SIGTERM)
    assert not processes_mentioning(str(tmp_path / "long.wav"))  # ffmpeg is gone too


def processes_mentioning(text: str) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if text in cmdline:
            found.append(cmdline)
    return found


def test_it_renders_the_shim_from_its_template_and_the_harness():
    manifest = {"name": "demo", "language": "python", "timeout": 30}
    rendered = shim.render(manifest).decode()
    assert "__CONFIG__" not in rendered and "__LANGUAGE__" not in rendered
    assert (REPO / "tools_app" / "runner" / "harness" / "harness.py").read_text() in json.loads(
        rendered.split("const TOOL = ", 1)[1].split(";\nconst HERE", 1)[0]
    )["harness"]
    files = {"TOOL.md": b"x", "index.py": b"y"}
    assert shim.mirror_files(files, manifest) == {**files, "index.js": rendered.encode()}
    # An http tool gets the one that invokes it in the console; a tool with its own
    # index.js and a typescript tool get none.
    http = {"name": "demo", "kind": "http"}
    assert shim.mirror_files({"TOOL.md": b"x"}, http)["index.js"] == shim.render_http(http)
    assert shim.render(http) == shim.render_http(http) != rendered.encode()
    own = {**files, "index.js": b"mine"}
    assert shim.mirror_files(own, manifest) == own
    ts = {"TOOL.md": b"x", "index.ts": b"y"}
    assert shim.mirror_files(ts, {**manifest, "language": "typescript"}) == ts


WAITS_PY = """import time

def execute(tool_call_id, params, signal, on_update):
    on_update({"content": [{"type": "text", "text": f"waiting {tool_call_id}"}]})
    while not signal.aborted:
        time.sleep(0.05)
    return {"content": [{"type": "text", "text": "saw the abort"}]}
"""


def test_it_stops_a_tool_at_its_timeout_and_reports_a_missing_interpreter(tmp_path):
    toolmd = b"---\nname: waits\ndescription: Waits.\nlanguage: python\ntimeout: 1\n---\n"
    manifest = parse_toolmd(toolmd).manifest.to_dict()
    write_signed_tool(
        tmp_path / "tools", manifest, {"TOOL.md": toolmd, "index.py": WAITS_PY.encode()}
    )

    updates, result = call(tmp_path / "tools", "waits", {})
    assert updates == ["waiting call-1"]
    assert result["isError"] is True
    assert text(result) == "The tool timed out after 1 s and was stopped.\nsaw the abort"

    _, result = call(tmp_path / "tools", "waits", {}, env={"TOOL_PYTHON": "/nonexistent/py"})
    assert result["isError"] is True
    assert "could not be started" in text(result) and "ENOENT" in text(result)
