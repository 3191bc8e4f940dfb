"""TypeScript stripped by the worker (tools_app/runner/tsstrip.py): a sandbox loads the
cached JavaScript in place of a tool's .ts files and never loads Node's type stripper;
the cache is keyed by the source and out of the tools' reach."""

from __future__ import annotations

import json
import os
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import require
from tools_app.runner import (
    FAILED,
    SUCCEEDED,
    Limits,
    RunOutcome,
    RunRequest,
    isolation_level,
    run,
    standby,
    tsstrip,
)

FAST = Limits(timeout=10, grace_seconds=1)

# What the tool reports: whether Node's type stripper (amaro) was loaded, and where.
PROBE_TS = """
    import { twice } from "./lib/util.ts";
    import { half } from "./half.mts";
    import { third } from "./plain.js";
    export async function execute(id: string, params: any) {
      const amaro = process.moduleLoadList.some((name) => name.includes("amaro"));
      const text = JSON.stringify({
        amaro, url: import.meta.url, n: twice(params.n), h: half(8), t: third(9),
      });
      return { content: [{ type: "text", text }] };
    }
    """
UTIL_TS = "export function twice(n: number): number {\n  return 2 * n;\n}\n"
HALF_MTS = "export const half = (n: number): number => n / 2;\n"
PLAIN_JS = "export const third = (n) => n / 3;\n"


@pytest.fixture(autouse=True)
def bwrap() -> Iterator[None]:
    require(isolation_level()[0] != "bwrap", "the stripped cache is used under bubblewrap")
    yield
    standby.discard_spare()


@pytest.fixture(params=["on", "off"], ids=["spare", "cold"])
def spares(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("TOOL_CONSOLE_SPARE_SANDBOXES", request.param)
    return request.param


def make_tool(tmp_path: Path, files: dict[str, str]) -> Path:
    folder = tmp_path / "tools" / uuid.uuid4().hex[:8]
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(textwrap.dedent(text))
    return folder


def run_tool(tmp_path: Path, tool_dir: Path, params: dict[str, Any] | None = None) -> RunOutcome:
    request = RunRequest(
        tool_dir=tool_dir,
        language="typescript",
        entry="index.ts",
        params=params or {},
        tool_call_id="call-1",
        env={},
        secrets={},
        limits=FAST,
        work_root=tmp_path / "runs" / uuid.uuid4().hex[:8],
    )
    return run(request)


def texts(outcome: RunOutcome) -> str:
    return "\n".join(item["text"] for item in outcome.result["content"])


def cache(tmp_path: Path) -> Path:
    return tmp_path / "runs" / f"ts-stripped-{os.getuid()}"


def probe_tool(tmp_path: Path) -> Path:
    files = {"index.ts": PROBE_TS, "lib/util.ts": UTIL_TS, "half.mts": HALF_MTS}
    return make_tool(tmp_path, files | {"plain.js": PLAIN_JS})


def test_it_loads_the_stripped_files_instead_of_nodes_type_stripper(
    tmp_path: Path, spares: str
) -> None:
    tool = probe_tool(tmp_path)
    for n in range(3):  # the first starts cold, the next in a spare (when spares are on)
        outcome = run_tool(tmp_path, tool, {"n": n})
        assert outcome.status == SUCCEEDED, outcome
        assert outcome.spare == (spares == "on" and n > 0)
        report = json.loads(texts(outcome))
        assert report == {
            "amaro": False,
            "url": "file:///tool/index.ts",
            "n": 2 * n,
            "h": 4,
            "t": 3,
        }
    entries = sorted(p.name for p in cache(tmp_path).iterdir())
    assert len(entries) == 3 and all(name.endswith(".js") for name in entries)  # 3 TS files


def test_it_strips_nothing_that_runs(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    source = (
        'import { writeFileSync } from "node:fs";\n'
        f"writeFileSync({json.dumps(str(marker))}, 'x');\n"
        "export const x: number = 1;\n"
    )
    tool = make_tool(tmp_path, {"index.ts": source})
    folder = cache(tmp_path)
    folder.mkdir(parents=True)
    entries = tsstrip.prepare(tool, folder)
    assert list(entries) == [Path("index.ts")]
    assert entries[Path("index.ts")].read_text() == source.replace(": number", "        ")
    assert not marker.exists()


def test_it_never_gives_a_changed_source_an_old_entry(tmp_path: Path) -> None:
    tool = make_tool(tmp_path, {"index.ts": PROBE_TS, "half.mts": HALF_MTS})
    (tool / "plain.js").write_text(PLAIN_JS)
    (tool / "lib").mkdir()
    texts_seen = []
    for factor in (2, 3):  # two versions of lib/util.ts, in the same folder
        (tool / "lib" / "util.ts").write_text(UTIL_TS.replace("2 * n", f"{factor} * n"))
        outcome = run_tool(tmp_path, tool, {"n": 5})
        assert outcome.status == SUCCEEDED, outcome
        texts_seen.append(json.loads(texts(outcome))["n"])
    assert texts_seen == [10, 15]
    utils = [p for p in cache(tmp_path).iterdir() if "* n" in p.read_text()]
    assert sorted("3 * n" in p.read_text() for p in utils) == [False, True]


ATTACK_TS = """
    import { openSync, readdirSync, writeFileSync, chmodSync, unlinkSync } from "node:fs";
    export async function execute(id: string, params: any) {
      const dir = "/opt/tool-console/js";
      const results: string[] = [];
      const attempt = (what: string, action: () => void) => {
        try { action(); results.push(`${what}: done`); }
        catch (error: any) { results.push(`${what}: ${error.code}`); }
      };
      for (const name of readdirSync(dir)) {
        const path = `${dir}/${name}`;
        attempt(`write ${name}`, () => openSync(path, "r+"));
        attempt(`chmod ${name}`, () => chmodSync(path, 0o666));
        attempt(`unlink ${name}`, () => unlinkSync(path));
      }
      attempt("create", () => writeFileSync(`${dir}/9.js`, "export const x = 1;"));
      return { content: [{ type: "text", text: JSON.stringify(results) }] };
    }
    """


def test_a_tool_cannot_write_its_stripped_files(tmp_path: Path, spares: str) -> None:
    tool = make_tool(tmp_path, {"index.ts": ATTACK_TS})
    source = (tool / "index.ts").read_text()
    for _ in range(2):
        outcome = run_tool(tmp_path, tool)
        assert outcome.status == SUCCEEDED, outcome
        results = json.loads(texts(outcome))
        assert len(results) == 4, results
        assert not [line for line in results if line.endswith(": done")], results
        # EROFS: the read-only bind refuses, whatever the files' owner and mode (opening
        # for writing may fail on the mode first: the tool does not own its copy).
        write, *changes = results
        assert write.endswith((": EROFS", ": EACCES")), results
        assert all(line.endswith(": EROFS") for line in changes), results
        # The cache still holds what was stripped: the sandboxes got copies.
        [entry] = cache(tmp_path).iterdir()
        stripped = entry.read_text()
        assert len(stripped) == len(source) and ": string" not in stripped
        assert stripped.split("\n")[1] == source.split("\n")[1]


def test_it_reports_a_typescript_syntax_error_with_its_position(tmp_path: Path) -> None:
    source = "export async function execute() {\n  const x: = 1;\n  return x;\n}\n"
    tool = make_tool(tmp_path, {"index.ts": source})
    outcome = run_tool(tmp_path, tool)
    assert outcome.status == FAILED
    assert "Could not load index.ts" in texts(outcome)
    assert "index.ts:2" in outcome.stderr_tail  # Node's own stripper, as before
    assert [p.suffix for p in cache(tmp_path).iterdir()] == [tsstrip.NO_ENTRY]


def test_it_reports_runtime_errors_at_the_typescript_lines(tmp_path: Path) -> None:
    source = (
        "type Params = { n: number };\n"
        "export async function execute(id: string, params: Params) {\n"
        "  throw new Error(`bad ${params.n as number}`);\n"
        "}\n"
    )
    tool = make_tool(tmp_path, {"index.ts": source})
    outcome = run_tool(tmp_path, tool, {"n": 7})
    assert outcome.status == FAILED
    assert texts(outcome) == "Error: bad 7"
    assert "file:///tool/index.ts:3:9" in outcome.stderr_tail
    assert [p.suffix for p in cache(tmp_path).iterdir()] == [".js"]


def test_it_leaves_commonjs_and_transforms_to_node(tmp_path: Path) -> None:
    enum = "enum Color { Red }\nexport async function execute() {\n  return Color.Red;\n}\n"
    tool = make_tool(tmp_path, {"index.ts": enum})
    outcome = run_tool(tmp_path, tool)
    assert outcome.status == FAILED
    assert "ERR_UNSUPPORTED_TYPESCRIPT_SYNTAX" in outcome.stderr_tail
    files = {"index.ts": "export const x: number = 1;\n", "package.json": '{"type": "commonjs"}'}
    commonjs = make_tool(tmp_path, files)
    folder = cache(tmp_path)
    assert tsstrip.prepare(commonjs, folder) == {}


def test_it_uses_no_cache_folder_others_may_write(tmp_path: Path) -> None:
    folder = cache(tmp_path)
    assert tsstrip.cache_dir(folder.parent) == folder
    assert folder.stat().st_mode & 0o777 == 0o700
    folder.chmod(0o777)  # made by someone else, or opened up: poisonable
    assert tsstrip.cache_dir(folder.parent) is None
    folder.chmod(0o700)
    folder.rmdir()
    folder.symlink_to(tmp_path)
    assert tsstrip.cache_dir(folder.parent) is None


def test_it_removes_entries_unused_for_a_month(tmp_path: Path) -> None:
    tool = make_tool(tmp_path, {"index.ts": "export const x: number = 1;\n"})
    folder = cache(tmp_path)
    folder.mkdir(parents=True)
    (used,) = tsstrip.prepare(tool, folder).values()
    stale, fresh = folder / "stale.js", folder / "fresh.js"
    stale.write_text("x")
    fresh.write_text("x")
    month = time.time() - tsstrip.UNUSED_SECONDS - 60
    for path in (stale, used):
        os.utime(path, (month, month))
    tsstrip.prepare(tool, folder)  # a use refreshes its entry
    assert tsstrip.prune(folder) == 1
    assert sorted(p.name for p in folder.iterdir()) == sorted([used.name, "fresh.js"])
    # The worker prunes once per process when it first uses the folder.
    os.utime(fresh, (month, month))
    tsstrip._pruned.discard(folder)
    assert tsstrip.cache_dir(folder.parent) == folder
    assert not fresh.exists() and used.exists()


def test_it_copies_what_is_left_when_an_entry_was_pruned(tmp_path: Path) -> None:
    tool = make_tool(tmp_path, {"index.ts": "export const x: number = 1;\n"})
    folder = cache(tmp_path)
    folder.mkdir(parents=True)
    entries = tsstrip.prepare(tool, folder)
    for path in entries.values():
        path.unlink()
    run_dir = tmp_path / "js"
    run_dir.mkdir()
    assert tsstrip.copy_into(entries, run_dir, "/opt/js") == {}
