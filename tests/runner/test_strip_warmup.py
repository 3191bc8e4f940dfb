"""A worker strips its TypeScript tools' types when it starts (tsstrip.warm,
run_execute.warm_strip_cache, the WarmStripCache bootstep in console/celery.py), so no pool
process strips them inside its first run of a tool."""

from __future__ import annotations

import logging
import os
import re
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from cryptography.fernet import Fernet

from console import celery as console_celery
from tests.catalog.test_bundle import write
from tests.support import require, toolmd_text
from tests.support.worker import CeleryWorker, worker_database_url
from tools_app.audit import Actor
from tools_app.catalog.versions import save_version
from tools_app.models import Run, Tool
from tools_app.runner import isolation_level, tsstrip
from tools_app.runs import execute as run_execute

SOURCE = "export const {name}: number = {n};\n"

# A tool with every case of the rules that decide what is stripped, and how.
TOOL_FILES = {
    "TOOL.md": b"---\nname: t\n---\n",
    "index.ts": b'import { a } from "./esm/a.ts";\nexport const x: number = a;\n',
    "half.mts": b"export const half = (n: number): number => n / 2;\n",
    # The nearest package.json says "module": stripped as an ES module whatever its syntax.
    "esm/package.json": b'{"type": "module"}',
    "esm/a.ts": b"export const a: number = 1;\n",
    "esm/deep/b.ts": b"const b: number = 2;\n",  # no module syntax, yet an ES module
    # Same bytes as esm/a.ts without "type": another module hint, so another key.
    "plain/a.ts": b"export const a: number = 1;\n",
    "node_modules/dep/index.ts": b"export const dep: number = 1;\n",  # never stripped
    "cjs/package.json": b'{"type": "commonjs"}',
    "cjs/c.ts": b"export const c: number = 3;\n",  # CommonJS: left to Node
    "odd/package.json": b"[1, 2]",  # not an object: left to Node
    "odd/d.ts": b"export const d: number = 4;\n",
    "bad/package.json": b"{not json",
    "bad/e.ts": b"export const e: number = 5;\n",
    "big.ts": b"export const big: string = '" + b"x" * 2000 + b"';\n",  # over the limit
    "plain.js": b"export const js = 1;\n",
}
STRIPPED = {"index.ts", "half.mts", "esm/a.ts", "esm/deep/b.ts", "plain/a.ts"}


@pytest.fixture(autouse=True)
def small_sources(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tsstrip, "MAX_SOURCE_BYTES", 1000)


@pytest.fixture
def node_calls(monkeypatch: pytest.MonkeyPatch) -> list[list[bytes]]:
    """The sources of each Node call that strips (the real one still runs)."""
    calls: list[list[bytes]] = []
    strip = tsstrip._strip

    def recording(node: str, cache: Path, missing: dict) -> int:
        calls.append([source for source, _ in missing.values()])
        return strip(node, cache, missing)

    monkeypatch.setattr(tsstrip, "_strip", recording)
    return calls


def new_cache(tmp_path: Path) -> Path:
    cache = tmp_path / uuid.uuid4().hex[:8]
    cache.mkdir(mode=0o700)
    return cache


def test_it_strips_in_memory_what_prepare_then_finds_on_disk(
    tmp_path: Path, node_calls: list[list[bytes]]
) -> None:
    cache = new_cache(tmp_path)
    assert tsstrip.warm([TOOL_FILES], cache) == len(STRIPPED)
    assert len(node_calls) == 1  # one Node for the whole warm-up
    assert len(list(cache.iterdir())) == len(STRIPPED)  # nothing for the skipped files
    node_calls.clear()
    entries = tsstrip.prepare(write(tmp_path / "tool", TOOL_FILES), cache)
    assert node_calls == []  # every key prepare() computes was warmed
    assert {str(path) for path in entries} == STRIPPED
    assert sorted(p.name for p in cache.iterdir()) == sorted(p.name for p in entries.values())
    # A second warm-up finds everything: no Node at all.
    assert tsstrip.warm([TOOL_FILES, TOOL_FILES], cache) == 0
    assert node_calls == []


def test_it_strips_each_source_once_across_tools(
    tmp_path: Path, node_calls: list[list[bytes]]
) -> None:
    cache = new_cache(tmp_path)
    shared = SOURCE.format(name="shared", n=1).encode()
    tools = [
        {"index.ts": shared},
        {"index.ts": shared, "lib.ts": SOURCE.format(name="lib", n=2).encode()},
    ]
    assert tsstrip.warm(tools, cache) == 2
    assert [sorted(call) for call in node_calls] == [sorted({shared, tools[1]["lib.ts"]})]


def test_it_leaves_a_syntax_error_a_no_entry_marker(
    tmp_path: Path, node_calls: list[list[bytes]]
) -> None:
    cache = new_cache(tmp_path)
    broken = {"index.ts": b"export async function execute() {\n  const x: = 1;\n}\n"}
    assert tsstrip.warm([broken], cache) == 0
    assert [p.suffix for p in cache.iterdir()] == [tsstrip.NO_ENTRY]
    node_calls.clear()
    assert tsstrip.prepare(write(tmp_path / "tool", broken), cache) == {}
    assert node_calls == []  # the marker answers: Node is not asked again


def test_it_never_raises_for_a_tool_or_a_missing_node(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    cache = new_cache(tmp_path)
    not_utf8 = {"index.ts": b"export const x: number = 1; // \xff\xfe\n"}
    odd_package = {"index.ts": b"export const y: number = 1;\n", "package.json": b"\x00\x01"}
    assert tsstrip.warm([not_utf8, odd_package, {}], cache) == 1  # odd_package: left to Node
    gone = tmp_path / "gone"
    assert tsstrip.warm([{"index.ts": b"export const x: number = 1;\n"}], gone) == 0

    def no_node() -> str:
        raise RuntimeError("Node.js is missing")

    monkeypatch.setattr(tsstrip.sandbox, "node_executable", no_node)
    with caplog.at_level(logging.ERROR, logger=tsstrip.logger.name):
        assert tsstrip.warm([TOOL_FILES], cache) == 0
    assert "could not warm" in caplog.text


# --------------------------------------------------------------------------------------
# The tools a worker warms


@pytest.fixture
def bwrap() -> None:
    require(isolation_level()[0] != "bwrap", "the stripped cache is used under bubblewrap")


def ts_files(name: str, n: int, extra: dict[str, bytes] | None = None) -> dict[str, bytes]:
    return {
        "TOOL.md": toolmd_text(name).encode(),
        "index.ts": f"export function execute(): number {{ return {n}; }}\n".encode(),
        **(extra or {}),
    }


def save(name: str, files: dict[str, bytes], publish: bool = True) -> Tool:
    save_version(name, files, actor=Actor.system(), publish=publish)
    return Tool.objects.get(name=name)


def strip_needed(tmp_path: Path, files: dict[str, bytes], cache: Path) -> list[bytes]:
    """The sources prepare() would still have to strip for a run of `files`."""
    asked: list[bytes] = []

    def record(node: str, cache: Path, missing: dict) -> int:
        asked.extend(source for source, _ in missing.values())
        return 0

    folder = write(tmp_path / uuid.uuid4().hex[:8], files)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tsstrip, "_strip", record)
        tsstrip.prepare(folder, cache)
    return asked


def worker_cache(settings) -> Path:
    return Path(settings.RUNS_WORK_PATH) / f"ts-stripped-{os.getuid()}"


@pytest.mark.django_db
def test_it_warms_the_published_versions_of_enabled_typescript_tools(
    tmp_path: Path, settings, bwrap: None, django_assert_max_num_queries: Callable
) -> None:
    shared = {"lib.mts": b"export const m: 1 = 1;\n"}
    published = {f"ts{i}": ts_files(f"ts{i}", i, shared) for i in range(5)}
    for name, files in published.items():
        save(name, files)
    draft_of_published = ts_files("ts0", 100)  # a newer draft: runs use the published one
    save("ts0", draft_of_published, publish=False)
    draft_only = ts_files("draft", 101)
    save("draft", draft_only, publish=False)
    disabled = ts_files("off", 102)
    Tool.objects.filter(pk=save("off", disabled).pk).update(enabled=False)
    python = {
        "TOOL.md": toolmd_text("py", language="python").encode(),
        "index.py": b"def execute(params):\n    return 1\n",
        "helper.ts": b"export const h: number = 103;\n",
    }
    save("py", python)

    with django_assert_max_num_queries(2):  # not one per tool
        stripped = run_execute.warm_strip_cache()
    assert stripped == 6  # five index.ts, one lib.mts shared by all
    cache = worker_cache(settings)
    for files in published.values():
        assert strip_needed(tmp_path, files, cache) == []
    for files in (draft_of_published, draft_only, disabled, python):
        assert strip_needed(tmp_path, files, cache) != []


@pytest.mark.django_db
def test_it_warms_at_most_the_recently_changed_versions(
    tmp_path: Path, settings, bwrap: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(run_execute, "WARM_VERSIONS", 4)
    monkeypatch.setattr(run_execute, "WARM_CHUNK", 3)  # the versions' files, 3 at a time
    versions = {f"ts{i}": ts_files(f"ts{i}", i) for i in range(5)}
    for age, (name, files) in enumerate(versions.items()):
        tool = save(name, files)
        Tool.objects.filter(pk=tool.pk).update(updated_at=tool.updated_at - timedelta(hours=age))
    assert run_execute.warm_strip_cache() == 4
    cache = worker_cache(settings)
    assert strip_needed(tmp_path, versions["ts4"], cache) != []  # the least recently changed
    for name in ("ts0", "ts1", "ts2", "ts3"):
        assert strip_needed(tmp_path, versions[name], cache) == []


@pytest.mark.django_db
def test_it_warms_nothing_where_runs_use_no_cache(
    settings, monkeypatch: pytest.MonkeyPatch, node_calls: list[list[bytes]]
) -> None:
    save("ts", ts_files("ts", 1))
    monkeypatch.setenv("TOOL_CONSOLE_SANDBOX", "process")  # no standby sandbox, no cache
    assert run_execute.warm_strip_cache() == 0
    assert not worker_cache(settings).exists()
    monkeypatch.delenv("TOOL_CONSOLE_SANDBOX")
    monkeypatch.setattr(tsstrip, "cache_dir", lambda folder: None)  # not a private folder
    assert run_execute.warm_strip_cache() == 0
    assert node_calls == []


def test_a_failed_warm_up_only_logs(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken() -> int:
        raise RuntimeError("the database is gone")

    monkeypatch.setattr(run_execute, "warm_strip_cache", broken)
    with caplog.at_level(logging.INFO, logger="console.celery"):
        console_celery.warm_strip_cache()
    assert "could not warm the TypeScript strip cache" in caplog.text
    monkeypatch.setattr(run_execute, "warm_strip_cache", lambda: 3)
    with caplog.at_level(logging.INFO, logger="console.celery"):
        console_celery.warm_strip_cache()
    assert re.search(r"strip cache warmed: 3 files stripped in \d+ ms", caplog.text)


# --------------------------------------------------------------------------------------
# A real worker


@pytest.fixture
def started_worker(django_db_blocker, tmp_path: Path) -> Iterator[Callable[[], CeleryWorker]]:
    with django_db_blocker.unblock():
        database_url = worker_database_url()
    require(database_url is None, "the worker needs a file SQLite or PostgreSQL test database")
    worker = CeleryWorker(
        root=tmp_path / "worker",
        broker_url="filesystem://",
        queue=f"warm-{uuid.uuid4().hex[:12]}",
        database_url=database_url,
        encryption_key=Fernet.generate_key().decode(),
        concurrency=2,
    )

    def start() -> CeleryWorker:
        worker.start()
        return worker

    yield start
    worker.stop()


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_starting_worker_strips_its_typescript_tools_before_any_run(
    tmp_path: Path, bwrap: None, started_worker: Callable
) -> None:
    files = ts_files("warm", int(time.time()))  # a source no cache has seen
    save("warm", files)
    expected = {
        p.name
        for p in tsstrip.prepare(write(tmp_path / "tool", files), new_cache(tmp_path)).values()
    }
    assert len(expected) == 1
    worker = started_worker()
    cache = worker.state_dir / "runs" / f"ts-stripped-{os.getuid()}"
    deadline = time.monotonic() + 60
    while not (cache.is_dir() and expected <= {p.name for p in cache.iterdir()}):
        assert time.monotonic() < deadline, f"no stripped entry in {cache}\n{worker.log()}"
        time.sleep(0.1)
    assert Run.objects.count() == 0
    deadline = time.monotonic() + 30
    while "strip cache warmed" not in worker.log():
        assert time.monotonic() < deadline, worker.log()
        time.sleep(0.1)
    assert re.search(r"strip cache warmed: 1 files stripped in \d+ ms", worker.log())
