"""Runaway and hostile tools: each ends with a clear status and message within its limits,
leaves no process behind, and the runner runs the next tool fine afterwards."""

from __future__ import annotations

import json
import os
import resource
import socket
import textwrap
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import require, unprivileged
from tools_app.runner import (
    CANCELLED,
    FAILED,
    SUCCEEDED,
    TIMED_OUT,
    Limits,
    RunOutcome,
    RunRequest,
    isolation_level,
    run,
)
from tools_app.runner.sandbox import process_network_isolation

REPO = Path(__file__).resolve().parents[2]
ENTRY = {
    "typescript": "index.ts",
    "javascript": "index.js",
    "python": "index.py",
    "bash": "index.sh",
}
SHORT = Limits(timeout=2, grace_seconds=1)
BWRAP = isolation_level()[0] == "bwrap"


def leftover_processes(tool_call_id: str) -> list[int]:
    """Processes still running with this run's TOOL_CALL_ID in their environment."""
    marker = f"TOOL_CALL_ID={tool_call_id}".encode()
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                environ = Path(f"/proc/{name}/environ").read_bytes()
            except OSError:
                continue
            if marker in environ.split(b"\0"):
                found.append(int(name))
    return found


def run_tool(
    tmp_path: Path, language: str, source: str, *, cancel_when_ready: bool = False, **fields: Any
) -> RunOutcome:
    folder = tmp_path / "tools" / uuid.uuid4().hex[:8]
    folder.mkdir(parents=True)
    (folder / ENTRY[language]).write_text(textwrap.dedent(source))
    cancel = threading.Event()
    call_id = f"fault-{uuid.uuid4().hex}"
    request = RunRequest(
        tool_dir=folder,
        language=language,
        entry=ENTRY[language],
        params=fields.pop("params", {}),
        tool_call_id=call_id,
        env=fields.pop("env", {}),
        secrets=fields.pop("secrets", {}),
        limits=fields.pop("limits", SHORT),
        work_root=tmp_path / "runs",
        **fields,
    )
    on_update = (lambda update: cancel.set()) if cancel_when_ready else None
    outcome = run(request, on_update=on_update, cancel=cancel)
    assert leftover_processes(call_id) == []
    return outcome


def texts(outcome: RunOutcome) -> str:
    return "\n".join(item["text"] for item in outcome.result["content"])


@pytest.fixture(autouse=True)
def next_run_works(tmp_path: Path) -> Iterator[None]:
    """After every fault, an ordinary tool still runs fine."""
    yield
    outcome = run_tool(tmp_path, "bash", "echo fine")
    assert (outcome.status, texts(outcome)) == (SUCCEEDED, "fine\n")


@pytest.fixture
def no_bwrap_no_cgroups(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fallback: a plain subprocess, limits enforced by rlimits and the watchdog."""
    if unprivileged.delegated():
        return  # the test runs in an unprivileged child, which sets these itself
    monkeypatch.setenv("TOOL_CONSOLE_SANDBOX", "process")
    monkeypatch.setenv("TOOL_CONSOLE_CGROUPS", "off")


LOOPS = {
    "typescript": "export async function execute() { while (true) {} }",
    "python": "def execute(tool_call_id, params, signal, on_update):\n    while True: pass\n",
    "bash": "while :; do :; done",
}


@pytest.mark.parametrize("language", sorted(LOOPS))
def test_it_times_out_a_tool_that_loops_forever(tmp_path: Path, language: str) -> None:
    outcome = run_tool(tmp_path, language, LOOPS[language])
    assert outcome.status == TIMED_OUT
    assert outcome.result["isError"] is True
    assert texts(outcome).startswith("Timed out: the tool did not finish within 2 s")


MEMORY_HOGS = {
    "typescript-heap": (
        "typescript",
        """
        export async function execute() {
          const keep: number[][] = [];
          while (true) keep.push(new Array(1 << 20).fill(1.5));
        }
        """,
    ),
    "typescript-buffers": (
        "typescript",
        """
        export async function execute() {
          const keep: Buffer[] = [];
          while (true) keep.push(Buffer.alloc(8 << 20, 1));
        }
        """,
    ),
    "python": (
        "python",
        """
        def execute(tool_call_id, params, signal, on_update):
            keep = []
            while True:
                keep.append(bytearray(8 << 20))
        """,
    ),
    "bash": ("bash", "tail /dev/zero  # keeps one endless line in memory"),
}
MEMORY_LIMITS = Limits(timeout=20, grace_seconds=1, memory_mb=256)


@pytest.mark.parametrize("case", sorted(MEMORY_HOGS))
def test_it_stops_a_tool_that_allocates_memory_without_end(tmp_path: Path, case: str) -> None:
    language, source = MEMORY_HOGS[case]
    outcome = run_tool(tmp_path, language, source, limits=MEMORY_LIMITS)
    assert outcome.status == FAILED
    assert "ran out of memory (limit 256 MiB)" in texts(outcome)


@unprivileged.when_root
def test_it_stops_a_node_memory_hog_without_bwrap_or_cgroups(
    tmp_path: Path, no_bwrap_no_cgroups: None
) -> None:
    language, source = MEMORY_HOGS["typescript-buffers"]
    outcome = run_tool(tmp_path, language, source, limits=MEMORY_LIMITS)
    assert outcome.isolation == "process"
    assert outcome.status == FAILED
    assert "ran out of memory (limit 256 MiB)" in texts(outcome)


FORK_BOMB = ":(){ :|:& };:\nsleep 15"
WAITS_FOR_ABORT_TS = """
    export async function execute(id: string, p: any, signal: AbortSignal, onUpdate: any) {
      onUpdate({ content: [{ type: "text", text: "ready" }] });
      await new Promise((resolve) => signal.addEventListener("abort", resolve));
      return { content: [{ type: "text", text: "aborted" }] };
    }
    """


def test_it_stops_a_fork_bomb(tmp_path: Path) -> None:
    outcome = run_tool(tmp_path, "bash", FORK_BOMB, limits=Limits(timeout=20, grace_seconds=1))
    assert outcome.status == FAILED
    assert texts(outcome) == "The tool exceeded the process limit (64 processes) and was stopped."


@unprivileged.when_root
def test_it_stops_too_many_processes_without_bwrap_or_cgroups(
    tmp_path: Path, no_bwrap_no_cgroups: None
) -> None:
    # A bounded "bomb": the watchdog must notice and kill, and the test stays harmless if not.
    outcome = run_tool(
        tmp_path,
        "bash",
        "for i in $(seq 1 300); do sleep 30 & done\nwait",
        limits=Limits(timeout=20, grace_seconds=1),
    )
    assert outcome.isolation == "process"
    assert outcome.status == FAILED
    assert texts(outcome) == "The tool exceeded the process limit (64 processes) and was stopped."


PRINT_100_MB = {
    "typescript": """
        export async function execute() {
          const chunk = "x".repeat(1 << 20);
          for (let i = 0; i < 100; i++) process.stdout.write(chunk);
          return { content: [{ type: "text", text: "printed" }] };
        }
        """,
    "python": """
        import sys

        def execute(tool_call_id, params, signal, on_update):
            chunk = "x" * (1 << 20)
            for _ in range(100):
                sys.stdout.write(chunk)
            return {"content": [{"type": "text", "text": "printed"}]}
        """,
    "bash": "head -c 100000000 /dev/zero | tr '\\0' x",
}


@pytest.mark.parametrize("language", sorted(PRINT_100_MB))
def test_it_keeps_bounded_output_of_a_tool_printing_100_mb(tmp_path: Path, language: str) -> None:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    outcome = run_tool(
        tmp_path, language, PRINT_100_MB[language], limits=Limits(timeout=60, grace_seconds=1)
    )
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kib < 50 * 1024  # the runner streamed it, it never held 100 MB
    assert outcome.status == SUCCEEDED
    if language == "bash":  # stdout is the result
        assert len(texts(outcome).encode()) <= 1 << 20
        assert texts(outcome).endswith("x\n\n[result truncated at 1 MiB]")
        assert "result truncated at 1 MiB (the tool returned 95.4 MiB)" in outcome.notices
    else:  # stdout is the log
        assert texts(outcome) == "printed"
        assert outcome.stderr_tail == "x" * (64 << 10)
        assert "stderr truncated to the last 64 KiB" in outcome.notices


CRASHES = {
    "typescript-throw": (
        "typescript",
        'export async function execute() { throw new TypeError("bad city"); }',
        "TypeError: bad city",
    ),
    "typescript-uncaught": (
        "typescript",
        """
        export async function execute() {
          setTimeout(() => { throw new Error("later"); }, 10);
          return new Promise(() => {});
        }
        """,
        "Uncaught exception: Error: later",
    ),
    "typescript-unhandled-rejection": (
        "typescript",
        """
        export async function execute() {
          Promise.reject(new RangeError("nobody waits for me"));
          return new Promise(() => {});
        }
        """,
        "Unhandled promise rejection: RangeError: nobody waits for me",
    ),
    "typescript-exit": (
        "typescript",
        "export async function execute() { process.exit(4); }",
        "The tool process exited with status 4 without returning a result.",
    ),
    "python-exception": (
        "python",
        """
        def execute(tool_call_id, params, signal, on_update):
            raise ValueError("city must not be empty")
        """,
        "ValueError: city must not be empty",
    ),
    "python-syntax-error": (
        "python",
        "def execute(:\n",
        "SyntaxError: ",
    ),
    "python-no-execute": ("python", "x = 1\n", "index.py does not define execute("),
    "python-segfault": (
        "python",
        """
        import ctypes
        def execute(tool_call_id, params, signal, on_update):
            ctypes.string_at(0)
        """,
        "The tool process was killed by SIGSEGV without returning a result.",
    ),
    "bash-exit-3": (
        "bash",
        """
        echo "partial output"
        echo "SEARXNG_URL is not set: configure the searxng integration" >&2
        exit 3
        """,
        "The tool exited with status 3.\n\nstdout (last lines):\npartial output\n\n"
        "stderr (last lines):\nSEARXNG_URL is not set: configure the searxng integration",
    ),
}


@pytest.mark.parametrize("case", sorted(CRASHES))
def test_it_reports_a_crash(tmp_path: Path, case: str) -> None:
    language, source, message = CRASHES[case]
    outcome = run_tool(tmp_path, language, source)
    assert outcome.status == FAILED
    assert outcome.result["isError"] is True
    assert texts(outcome).startswith(message)


MALFORMED = {
    "typescript-string": (
        "typescript",
        'export async function execute() { return "just text"; }',
        'execute() result must be an object like {content: [{type: "text", text: "..."}],'
        ' isError: false}, got "just text"',
    ),
    "typescript-item": (
        "typescript",
        'export async function execute() { return { content: [{ type: "image", data: 1 }] }; }',
        'execute() result.content[0] must be {type: "text", text: string},'
        ' got {"type":"image","data":1}',
    ),
    "typescript-undefined": (
        "typescript",
        "export async function execute() {}",
        "execute() result must be an object like",
    ),
    "python-none": (
        "python",
        "def execute(tool_call_id, params, signal, on_update):\n    return None\n",
        "execute() result must be a dict like",
    ),
    "python-content": (
        "python",
        "def execute(tool_call_id, params, signal, on_update):\n    return {'content': 'hi'}\n",
        "execute() result['content'] must be a list, got 'hi'",
    ),
    "python-is-error": (
        "python",
        "def execute(tool_call_id, params, signal, on_update):\n"
        "    return {'content': [], 'isError': 'yes'}\n",
        "execute() result['isError'] must be a bool, got 'yes'",
    ),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_it_rejects_a_malformed_result(tmp_path: Path, case: str) -> None:
    language, source, problem = MALFORMED[case]
    outcome = run_tool(tmp_path, language, source)
    assert outcome.status == FAILED
    assert texts(outcome).startswith(f"The tool returned a malformed result: {problem}")


def test_it_rejects_a_malformed_progress_update(tmp_path: Path) -> None:
    outcome = run_tool(
        tmp_path,
        "typescript",
        'export async function execute(id, p, s, onUpdate) { onUpdate("50%"); }',
    )
    assert outcome.status == FAILED
    assert texts(outcome).startswith("TypeError: onUpdate() argument must be an object like")


def test_it_times_out_a_promise_that_never_resolves(tmp_path: Path) -> None:
    outcome = run_tool(
        tmp_path, "typescript", "export function execute() { return new Promise(() => {}); }"
    )
    assert outcome.status == TIMED_OUT
    assert texts(outcome) == (
        "Timed out: the tool did not finish within 2 s; it ignored the stop signal and was"
        " killed after 1 s."
    )


def test_it_kills_a_python_tool_that_ignores_the_abort_signal(tmp_path: Path) -> None:
    outcome = run_tool(
        tmp_path,
        "python",
        """
        import time

        def execute(tool_call_id, params, signal, on_update):
            on_update({"content": [{"type": "text", "text": "ready"}]})
            while True:
                time.sleep(0.05)
        """,
        cancel_when_ready=True,
        limits=Limits(timeout=30, grace_seconds=1),
    )
    assert outcome.status == CANCELLED
    assert texts(outcome) == (
        "Cancelled: the run was cancelled; the tool ignored the abort signal and was killed"
        " after 1 s."
    )


def test_it_kills_a_bash_tool_that_ignores_sigterm(tmp_path: Path) -> None:
    outcome = run_tool(
        tmp_path,
        "bash",
        "trap '' TERM\necho ready >&3\nwhile :; do sleep 0.05; done",
        cancel_when_ready=True,
        limits=Limits(timeout=30, grace_seconds=1),
    )
    assert outcome.status == CANCELLED
    assert "killed after 1 s" in texts(outcome)


HOST_FILES_PY = """
import json

def execute(tool_call_id, params, signal, on_update):
    lines = []
    for path in params["paths"]:
        try:
            with open(path, "rb") as handle:
                lines.append(f"{path}: READ {handle.read()[:40]!r}")
        except OSError as exc:
            lines.append(f"{path}: {type(exc).__name__}")
    return {"content": [{"type": "text", "text": "\\n".join(lines)}]}
"""
HOST_FILES_BASH = """
while read -r p; do
  if cat "$p" >/dev/null 2>&1; then echo "$p: READ $(head -c 40 "$p")"; else echo "$p: denied"; fi
done <<< "$INPUT_LINES"
"""


@pytest.mark.parametrize("language", ["python", "bash"])
def test_it_cannot_read_the_consoles_secrets(tmp_path: Path, language: str) -> None:
    require(not BWRAP, "only bubblewrap hides the host's files")
    data = tmp_path / "var" / "data"
    data.mkdir(parents=True)
    database = data / "db.sqlite3"
    database.write_bytes(b"SQLite format 3\0CANARY-DATABASE")
    key = data / "encryption.key"
    key.write_text("CANARY-KEY")
    key.chmod(0o600)
    paths = [
        "/etc/shadow",
        str(REPO / "pyproject.toml"),
        str(REPO / "console" / "settings.py"),
        str(database),
        str(key),
        "/etc/ssl/private/ssl-cert-snakeoil.key",
    ]
    source = HOST_FILES_PY if language == "python" else HOST_FILES_BASH
    params = {"paths": paths, "lines": "\n".join(paths)}
    outcome = run_tool(tmp_path, language, source, params=params)
    assert outcome.status == SUCCEEDED, outcome
    report = texts(outcome)
    assert "READ" not in report, report
    assert len(report.strip().splitlines()) == len(paths)
    assert "CANARY" not in report + outcome.stderr_tail


ENV_DUMP = {
    "typescript": """
        export async function execute() {
          return { content: [{ type: "text", text: JSON.stringify(process.env) }] };
        }
        """,
    "python": """
        import json, os

        def execute(tool_call_id, params, signal, on_update):
            try:  # bwrap's init: root's, so unreadable when the tool runs as another uid
                proc1 = open("/proc/1/environ", "rb").read().decode(errors="replace")
            except PermissionError:
                proc1 = ""
            return {"content": [{"type": "text", "text": json.dumps(dict(os.environ))},
                                {"type": "text", "text": proc1}]}
        """,
    "bash": "env",
}


@pytest.mark.parametrize("language", sorted(ENV_DUMP))
def test_it_hides_the_consoles_environment(
    tmp_path: Path, language: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONSOLE_SECRET_KEY", "canary-console-secret-key")
    monkeypatch.setenv("CONSOLE_ENCRYPTION_KEYS", "canary-encryption-key")
    outcome = run_tool(
        tmp_path, language, ENV_DUMP[language], env={"SEARXNG_URL": "http://searx.local"}
    )
    assert outcome.status == SUCCEEDED, outcome
    assert "canary" not in json.dumps(outcome.result) + outcome.stderr_tail
    dump = outcome.result["content"][0]["text"]
    if language == "bash":
        env = dict(line.split("=", 1) for line in dump.splitlines())
    else:
        env = json.loads(dump)
    shell_own = {"PWD", "SHLVL", "_", "OLDPWD"}  # bash sets these itself
    assert set(env) - shell_own == {
        "PATH",
        "HOME",
        "LANG",
        "TMPDIR",
        "TOOL_OUTPUT_DIR",
        "TOOL_CALL_ID",
        "SEARXNG_URL",
    }


def test_it_refuses_integration_variables_that_steer_the_interpreter(tmp_path: Path) -> None:
    outcome = run_tool(
        tmp_path,
        "bash",
        'echo "${LD_PRELOAD:-none} ${PATH}"',
        env={"LD_PRELOAD": "/tmp/evil.so", "PATH": "/evil", "GOOD": "1"},
    )
    assert outcome.status == SUCCEEDED
    assert texts(outcome).startswith("none ")
    assert "/evil" not in texts(outcome)
    assert "environment variable LD_PRELOAD from integrations ignored (reserved)" in (
        outcome.notices
    )


CONNECT_PY = """
import socket

def execute(tool_call_id, params, signal, on_update):
    try:
        socket.create_connection(("127.0.0.1", params["port"]), timeout=2).close()
        text = "connected"
    except OSError as exc:
        text = f"blocked: {exc}"
    return {"content": [{"type": "text", "text": text}]}
"""


def test_it_blocks_the_network_when_network_is_false(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOL_CONSOLE_SANDBOX", "auto")
    require(isolation_level()[0] != "bwrap", "bubblewrap cannot run on this host")
    allowed, blocked = _connect_with_and_without_network(tmp_path, monkeypatch)
    assert texts(allowed) == "connected"
    assert texts(blocked).startswith("blocked: ")
    assert blocked.notices == []


@unprivileged.when_root
def test_it_blocks_the_network_or_says_it_cannot_in_the_process_fallback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without bwrap (as a non-root worker: a root one refuses the fallback), network: false
    needs a network namespace for a plain process; where the host gives none, the run says
    so instead of leaving the tool silently connected."""
    monkeypatch.setenv("TOOL_CONSOLE_SANDBOX", "process")
    allowed, blocked = _connect_with_and_without_network(tmp_path, monkeypatch)
    assert texts(allowed) == "connected"
    if process_network_isolation():
        assert texts(blocked).startswith("blocked: ") and blocked.notices == []
    else:
        assert texts(blocked) == "connected"
        assert "network: false is not enforced under process isolation here" in blocked.notices


def _connect_with_and_without_network(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        # The host's loopback is refused to network: true runs unless the allow list names
        # it (tests/egress/test_egress_sandbox.py); network: false stays blocked even then.
        monkeypatch.setenv("CONSOLE_TOOL_NETWORK_ALLOW", f"127.0.0.1:{port}")
        allowed = run_tool(tmp_path, "python", CONNECT_PY, params={"port": port}, network=True)
        blocked = run_tool(tmp_path, "python", CONNECT_PY, params={"port": port}, network=False)
    return allowed, blocked


@unprivileged.when_root
def test_it_runs_cancels_and_hides_the_environment_without_bwrap(
    tmp_path: Path, no_bwrap_no_cgroups: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONSOLE_SECRET_KEY", "canary-console-secret-key")
    outcome = run_tool(tmp_path, "typescript", ENV_DUMP["typescript"])
    assert (outcome.isolation, outcome.status) == ("process", SUCCEEDED)
    assert "canary" not in texts(outcome)
    outcome = run_tool(tmp_path, "typescript", WAITS_FOR_ABORT_TS, cancel_when_ready=True)
    assert outcome.status == CANCELLED
    assert texts(outcome) == "Cancelled: the run was cancelled.\naborted"
