"""Spare sandboxes (tools_app/runner/standby.py): the next run of a shape starts in a
sandbox started in advance, and gets exactly what a cold run gets: only its own variables,
a fresh work dir and /tmp, the same limits and isolation."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import textwrap
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.runner.test_runner_faults import (
    CONNECT_PY,
    HOST_FILES_PY,
    LOOPS,
    MEMORY_HOGS,
    WAITS_FOR_ABORT_TS,
)
from tests.support import require
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
    standby,
)

ENTRY = {"typescript": "index.ts", "javascript": "index.js", "python": "index.py"}
FAST = Limits(timeout=5, grace_seconds=1)
REPO = Path(__file__).resolve().parents[2]

ENV_TS = """
    import { readdirSync } from "node:fs";
    export async function execute(id: string, params: any) {
      const home = readdirSync(process.env.HOME!).sort();
      const tmp = readdirSync("/tmp").sort();
      const text = JSON.stringify({ id, params, env: process.env, home, tmp });
      return { content: [{ type: "text", text }] };
    }
    """
ENV_PY = """
    import json, os

    def execute(tool_call_id, params, signal, on_update):
        text = json.dumps({"id": tool_call_id, "params": params, "env": dict(os.environ),
                           "home": sorted(os.listdir(os.environ["HOME"])),
                           "tmp": sorted(os.listdir("/tmp"))})
        return {"content": [{"type": "text", "text": text}]}
    """
ENV_JS = ENV_TS.replace("id: string, params: any", "id, params").replace("HOME!", "HOME")
SOURCES = {"typescript": ENV_TS, "javascript": ENV_JS, "python": ENV_PY}
LITTER_TS = """
    import { writeFileSync } from "node:fs";
    export async function execute() {
      writeFileSync(`${process.env.HOME}/left-behind`, "x");
      writeFileSync("/tmp/left-behind", "x");
      return { content: [{ type: "text", text: "littered" }] };
    }
    """


@pytest.fixture(autouse=True)
def spares(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    require(isolation_level()[0] != "bwrap", "spare sandboxes need bubblewrap")
    monkeypatch.setenv("TOOL_CONSOLE_SPARE_SANDBOXES", "on")
    yield
    standby.discard_spare()


def make_tool(tmp_path: Path, language: str, source: str) -> Path:
    folder = tmp_path / "tools" / uuid.uuid4().hex[:8]
    folder.mkdir(parents=True)
    (folder / ENTRY[language]).write_text(textwrap.dedent(source))
    return folder


def run_tool(tmp_path: Path, language: str, source: str, **fields: Any) -> RunOutcome:
    cancel = fields.pop("cancel", None)
    on_update = fields.pop("on_update", None)
    request = RunRequest(
        tool_dir=make_tool(tmp_path, language, source),
        language=language,
        entry=ENTRY[language],
        params=fields.pop("params", {}),
        tool_call_id=fields.pop("tool_call_id", f"call-{uuid.uuid4().hex[:8]}"),
        env=fields.pop("env", {}),
        secrets=fields.pop("secrets", {}),
        limits=fields.pop("limits", FAST),
        work_root=tmp_path / "runs" / uuid.uuid4().hex[:8],
        **fields,
    )
    return run(request, on_update=on_update, cancel=cancel)


def texts(outcome: RunOutcome) -> str:
    return "\n".join(item["text"] for item in outcome.result["content"])


def report(outcome: RunOutcome) -> dict[str, Any]:
    assert outcome.status == SUCCEEDED, outcome
    return json.loads(texts(outcome))


def warm_up(tmp_path: Path, language: str, **fields: Any) -> None:
    """One run of the shape, then its spare: the next run finds it even on a loaded machine
    (a run waits only SPARE_WAIT_SECONDS for a spare still starting, then starts cold)."""
    assert run_tool(tmp_path, language, SOURCES[language], **fields).status == SUCCEEDED
    ready_spare()


def ready_spare() -> standby.Sandbox:
    """The spare being started in the background, once it is there."""
    deadline = time.monotonic() + 20
    while standby._keeper.spare is None and time.monotonic() < deadline:
        time.sleep(0.01)
    spare = standby._keeper.spare
    assert spare is not None and spare.proc is not None
    return spare


def keeper_idle() -> None:
    """Wait until the spare keeper has nothing left to do: nothing wanted, being started
    or waiting to be thrown away."""
    keeper = standby._keeper
    deadline = time.monotonic() + 30
    with keeper.cond:
        while keeper.wanted is not None or keeper.making is not None or keeper.trash:
            remaining = deadline - time.monotonic()
            assert remaining > 0, "the spare keeper stayed busy"
            keeper.cond.wait(remaining)


@pytest.mark.parametrize("language", sorted(ENTRY))
def test_it_starts_the_next_run_of_a_shape_in_a_spare(tmp_path: Path, language: str) -> None:
    source = SOURCES[language]
    first = run_tool(tmp_path, language, source, params={"n": 1}, tool_call_id="first")
    second = run_tool(tmp_path, language, source, params={"n": 2}, tool_call_id="second")
    assert (first.spare, second.spare) == (False, True)
    assert (first.isolation, second.isolation) == ("bwrap", "bwrap")
    assert report(second)["params"] == {"n": 2}
    assert report(second)["id"] == "second"
    assert report(second)["env"]["TOOL_CALL_ID"] == "second"


def test_it_waits_for_a_spare_that_starts_slowly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A loaded machine starts a spare slowly; the next run waits for it rather than doing
    the same start again from the beginning (a flake in CI when the wait was 1 s)."""
    start = standby.Sandbox.start

    def slow_start(*args: Any, **kwargs: Any) -> standby.Sandbox:
        time.sleep(2.5)
        return start(*args, **kwargs)

    monkeypatch.setattr(standby.Sandbox, "start", slow_start)
    first = run_tool(tmp_path, "python", ENV_PY)
    second = run_tool(tmp_path, "python", ENV_PY)
    assert (first.spare, second.spare) == (False, True)


def test_it_gives_a_spare_only_the_runs_own_variables(tmp_path: Path) -> None:
    first = run_tool(tmp_path, "typescript", ENV_TS, env={"APIFY_TOKEN": "canary-first-run"})
    assert report(first)["env"]["APIFY_TOKEN"] == "canary-first-run"
    second = run_tool(tmp_path, "typescript", ENV_TS, env={"SEARXNG_URL": "http://searx.local"})
    assert second.spare
    env = report(second)["env"]
    assert "canary" not in texts(second) + second.stderr_tail
    assert set(env) - {"PWD"} == {  # PWD: set by the sandbox's first shell, as cold
        "PATH",
        "HOME",
        "LANG",
        "TMPDIR",
        "TOOL_OUTPUT_DIR",
        "TOOL_CALL_ID",
        "SEARXNG_URL",
    }


def test_it_redacts_a_spares_secrets_like_a_cold_runs(tmp_path: Path) -> None:
    warm_up(tmp_path, "typescript")
    outcome = run_tool(
        tmp_path,
        "typescript",
        """
        export async function execute() {
          console.error(`token ${process.env.APIFY_TOKEN}`);
          return { content: [{ type: "text", text: `token ${process.env.APIFY_TOKEN}` }] };
        }
        """,
        env={"APIFY_TOKEN": "canary-spare-secret"},
        secrets={"{{apify.APIFY_TOKEN}}": "canary-spare-secret"},
    )
    assert outcome.spare
    assert texts(outcome) == "token {{apify.APIFY_TOKEN}}"
    assert "canary" not in outcome.stderr_tail


def test_it_gives_each_run_an_empty_work_dir_and_tmp(tmp_path: Path) -> None:
    assert texts(run_tool(tmp_path, "typescript", LITTER_TS)) == "littered"
    ready_spare()
    outcome = run_tool(tmp_path, "typescript", ENV_TS)
    assert outcome.spare
    assert (report(outcome)["home"], report(outcome)["tmp"]) == (["output"], [])


def test_it_starts_cold_when_the_shape_differs(tmp_path: Path) -> None:
    warm_up(tmp_path, "typescript")
    other_memory = run_tool(
        tmp_path, "typescript", ENV_TS, limits=Limits(timeout=5, grace_seconds=1, memory_mb=256)
    )
    assert not other_memory.spare
    other_language = run_tool(tmp_path, "python", ENV_PY, limits=FAST)
    assert not other_language.spare
    no_network = run_tool(tmp_path, "python", ENV_PY, network=False)
    assert not no_network.spare
    # Only the wall time differs: it is the run's, not the sandbox's.
    ready_spare()
    longer = run_tool(tmp_path, "python", ENV_PY, network=False, limits=Limits(timeout=9))
    assert longer.spare


def test_it_never_keeps_a_spare_for_tools_that_read_host_files(tmp_path: Path) -> None:
    shared = tmp_path / "inputs"
    shared.mkdir()
    (shared / "data.txt").write_text("first")
    source = """
        import { readFileSync } from "node:fs";
        export async function execute(id: string, params: any) {
          return { content: [{ type: "text", text: readFileSync(params.path, "utf8") }] };
        }
        """
    params = {"path": str(shared / "data.txt")}
    first = run_tool(tmp_path, "typescript", source, params=params, ro_binds=(shared,))
    assert texts(first) == "first"
    # Replaced by rename: a sandbox started before would still see the old file.
    (shared / "new.txt").write_text("second")
    os.replace(shared / "new.txt", shared / "data.txt")
    second = run_tool(tmp_path, "typescript", source, params=params, ro_binds=(shared,))
    assert (second.spare, texts(second)) == (False, "second")


def test_it_keeps_network_false_in_a_spare(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        params = {"port": server.getsockname()[1]}
        run_tool(tmp_path, "python", CONNECT_PY, params=params, network=False)
        ready_spare()
        blocked = run_tool(tmp_path, "python", CONNECT_PY, params=params, network=False)
    assert blocked.spare
    assert texts(blocked).startswith("blocked: ")


def test_it_hides_the_consoles_files_from_a_spare(tmp_path: Path) -> None:
    paths = ["/etc/shadow", str(REPO / "pyproject.toml"), str(REPO / "console" / "settings.py")]
    warm_up(tmp_path, "python")
    outcome = run_tool(tmp_path, "python", HOST_FILES_PY, params={"paths": paths})
    assert outcome.spare
    assert outcome.status == SUCCEEDED
    assert "READ" not in texts(outcome), texts(outcome)


FORK_PY = """
    import os, time

    def execute(tool_call_id, params, signal, on_update):
        while True:
            try:
                if os.fork() == 0:
                    time.sleep(30)
                    os._exit(0)
            except OSError:  # the limit: keep trying, as a real bomb would
                time.sleep(0.01)
    """
RUNAWAYS = {  # language, source, limits, status, message
    "loop": (
        "typescript",
        LOOPS["typescript"],
        Limits(timeout=2, grace_seconds=1),
        TIMED_OUT,
        "Timed out: the tool did not finish within 2 s",
    ),
    "fork-bomb": (
        "python",
        FORK_PY,
        Limits(timeout=20, grace_seconds=1),
        FAILED,
        "The tool exceeded the process limit (64 processes)",
    ),
    "memory-hog": (
        "typescript",
        MEMORY_HOGS["typescript-buffers"][1],
        Limits(timeout=20, grace_seconds=1, memory_mb=256),
        FAILED,
        "The tool ran out of memory (limit 256 MiB)",
    ),
}


@pytest.mark.parametrize("case", sorted(RUNAWAYS))
def test_it_stops_a_runaway_tool_in_a_spare(tmp_path: Path, case: str) -> None:
    language, source, limits, status, message = RUNAWAYS[case]
    warm_up(tmp_path, language, limits=limits)
    outcome = run_tool(tmp_path, language, source, limits=limits)
    assert outcome.spare
    # The message names the limit that stopped it (not a later one, nor the timeout).
    assert (outcome.status, texts(outcome)[: len(message)]) == (status, message)


def test_it_cancels_a_run_in_a_spare(tmp_path: Path) -> None:
    warm_up(tmp_path, "typescript")
    cancel = threading.Event()
    outcome = run_tool(
        tmp_path,
        "typescript",
        WAITS_FOR_ABORT_TS,
        cancel=cancel,
        on_update=lambda update: cancel.set(),
    )
    assert outcome.spare
    assert (outcome.status, texts(outcome)) == (
        CANCELLED,
        "Cancelled: the run was cancelled.\naborted",
    )


def test_it_feeds_params_larger_than_a_pipe_to_a_spare(tmp_path: Path) -> None:
    warm_up(tmp_path, "typescript")
    big = "x" * (1 << 20)
    outcome = run_tool(
        tmp_path,
        "typescript",
        """
        export async function execute(id: string, params: any) {
          return { content: [{ type: "text", text: String(params.big.length) }] };
        }
        """,
        params={"big": big},
    )
    assert outcome.spare
    assert texts(outcome) == str(len(big))


def test_it_starts_cold_when_the_spare_died(tmp_path: Path) -> None:
    warm_up(tmp_path, "typescript")
    spare = ready_spare()
    os.killpg(spare.proc.pid, signal.SIGKILL)
    spare.proc.wait()
    outcome = run_tool(tmp_path, "typescript", ENV_TS)
    assert (outcome.spare, outcome.status) == (False, SUCCEEDED)


def test_it_discards_an_idle_spare(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(standby, "SPARE_IDLE_SECONDS", 0.5)
    warm_up(tmp_path, "typescript")
    spare = ready_spare()
    deadline = time.monotonic() + 10
    while standby._keeper.spare is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert standby._keeper.spare is None
    while spare.root.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert spare.proc.poll() is not None
    assert not spare.root.exists()
    assert not any((tmp_path / "runs").glob("spare-*"))


def test_it_makes_no_spare_when_spares_are_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOL_CONSOLE_SPARE_SANDBOXES", "off")
    # The warm-up run alone: warm_up() would wait for the spare this test says never comes.
    assert run_tool(tmp_path, "typescript", ENV_TS).status == SUCCEEDED
    assert run_tool(tmp_path, "typescript", ENV_TS).spare is False
    assert standby._keeper.spare is None


def test_a_forked_child_does_not_hold_up_a_spare(tmp_path: Path) -> None:
    warm_up(tmp_path, "typescript")
    ready_spare()
    child = os.fork()
    if child == 0:  # holds copies of every inheritable and CLOEXEC descriptor till killed
        time.sleep(300)
        os._exit(0)
    try:
        outcome = run_tool(tmp_path, "typescript", ENV_TS)
        assert outcome.spare
        # Held up by the child's copies, the run would end by its timeout, not succeed.
        assert outcome.status == SUCCEEDED
        assert os.waitpid(child, os.WNOHANG) == (0, 0)  # the child held them all along
    finally:
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)


def test_concurrent_runs_of_a_shape_leave_one_spare(tmp_path: Path) -> None:
    for _ in range(2):  # the second run ends while the first one's spare is being started
        threads = [
            threading.Thread(target=run_tool, args=(tmp_path, "typescript", ENV_TS))
            for _ in range(2)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    spare = ready_spare()
    keeper_idle()  # anything that would (wrongly) replace it has been done by now
    assert standby._keeper.spare is spare
    standby.discard_spare()
    assert not any((tmp_path / "runs").glob("spare-*"))


def test_it_sweeps_the_spare_folder_of_a_killed_worker_process(tmp_path):
    """A worker killed with SIGKILL cannot discard its spare: the next sweep removes the
    folder of an owner that is gone, and keeps a live owner's."""
    gone = subprocess.Popen(["true"])
    gone.wait()
    dead = tmp_path / f"{standby.PREFIX}{standby._owner(gone.pid)}-abc"
    alive = tmp_path / f"{standby.PREFIX}{standby._owner()}-def"
    foreign = tmp_path / f"{standby.PREFIX}00000000.{gone.pid}-0ab"  # another host's
    for folder in (dead, alive, foreign):
        folder.mkdir()

    standby._sweep(tmp_path)

    assert not dead.exists() and alive.exists() and foreign.exists()


def test_it_sweeps_the_spare_folder_of_an_owner_that_is_a_zombie(tmp_path):
    """A killed worker's pool process that nobody reaped (a container's or a PID
    namespace's first process may never reap orphans) still answers signal 0, but it is
    dead: its folder goes. Seen on a fresh Debian root entered through pivot_root."""
    zombie = subprocess.Popen(["true"])
    for _ in range(500):  # exited, and left unreaped: the state is Z
        if Path(f"/proc/{zombie.pid}/stat").read_text().rpartition(")")[2].split()[0] == "Z":
            break
        time.sleep(0.01)
    folder = tmp_path / f"{standby.PREFIX}{standby._owner(zombie.pid)}-abc"
    folder.mkdir()

    standby._sweep(tmp_path)

    assert not folder.exists()
    zombie.wait()


def test_it_sweeps_again_when_a_worker_process_stops(tmp_path: Path) -> None:
    """A killed worker's pool processes may outlive it: still alive at the next worker's
    first sweep, gone by the time it stops. The stop removes their spare folders."""
    warm_up(tmp_path, "typescript")
    ready_spare()  # the first sweep of runs/ is done
    orphan = subprocess.Popen(["sleep", "60"])
    leftover = tmp_path / "runs" / f"{standby.PREFIX}{standby._owner(orphan.pid)}-abc"
    leftover.mkdir()
    orphan.kill()
    orphan.wait()

    standby.discard_spare()

    assert not any((tmp_path / "runs").glob("spare-*"))
