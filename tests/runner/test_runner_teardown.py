"""A run's teardown (tools_app/runner/teardown.py): the outcome goes out once every process
of the run is dead; the cgroup, the disk quota's mount, the network and the run dir are
freed afterwards on the teardown thread, and drain() waits for that (at exit too)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.runner.test_runner_privilege import processes_with_argument
from tests.support import prerequisite, require
from tools_app.runner import (
    SUCCEEDED,
    Limits,
    RunOutcome,
    RunRequest,
    cgroups,
    isolation_level,
    run,
    standby,
    teardown,
)

REPO = Path(__file__).resolve().parents[2]
ROOT = os.geteuid() == 0
FAST = Limits(timeout=20, grace_seconds=1)
ENTRY = {"bash": "index.sh", "python": "index.py"}
PYTHON_OK = "def execute(tool_call_id, params, signal, on_update):\n    return {'content': []}\n"


@pytest.fixture(autouse=True)
def needs_bwrap() -> None:
    require(isolation_level()[0] != "bwrap", "bubblewrap cannot run here")


@pytest.fixture
def made_cgroups(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The directories of every cgroup made for a run from now on (other workers on the
    host make theirs beside them)."""
    made: list[Path] = []
    create = cgroups.create

    def recording(*args, **kwargs):
        cgroup = create(*args, **kwargs)
        if cgroup is not None:
            made.extend(path for _, path in cgroup._dirs.values())
        return cgroup

    monkeypatch.setattr(cgroups, "create", recording)
    return made


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Callable[[], None]]]:
    """Teardowns kept back instead of run: what a run left to them stays behind."""
    jobs: list[Callable[[], None]] = []
    monkeypatch.setattr(teardown, "submit", jobs.append)
    yield jobs
    for job in jobs:  # whatever the test did, free it
        job()


def run_tool(tmp_path: Path, language: str, source: str, **fields) -> RunOutcome:
    folder = tmp_path / "tools" / uuid.uuid4().hex[:8]
    folder.mkdir(parents=True)
    (folder / ENTRY[language]).write_text(textwrap.dedent(source))
    request = RunRequest(
        tool_dir=folder,
        language=language,
        entry=ENTRY[language],
        params={},
        tool_call_id=f"call-{uuid.uuid4().hex[:8]}",
        env={},
        secrets={},
        limits=fields.pop("limits", FAST),
        work_root=tmp_path / "runs" / uuid.uuid4().hex[:8],
        **fields,
    )
    return run(request)


def quota_mounts(under: Path) -> list[str]:
    with open("/proc/self/mountinfo") as mountinfo:
        return [line for line in mountinfo if str(under) in line]


def run_dirs(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "runs").glob("*/run-*"))


def detaching(marker: str) -> str:
    """A bash tool that leaves sleepers behind in every way a shell can detach one."""
    return f"""
        setsid sleep {marker} < /dev/null > /dev/null 2>&1 &
        nohup sleep {marker} < /dev/null > /dev/null 2>&1 &
        ( ( sleep {marker} < /dev/null > /dev/null 2>&1 & ) & )
        sleep 0.2
        echo detached
        """


def test_it_kills_a_detached_process_before_the_outcome_goes_out(
    tmp_path: Path, held: list
) -> None:
    """With the teardown held back, the run's detached sleepers are gone all the same: the
    runner kills them (and, under bwrap, the kernel with the sandbox's PID namespace)
    before the outcome is returned, not in the teardown."""
    marker = f"302.{uuid.uuid4().int % 10**9}"
    outcome = run_tool(tmp_path, "bash", detaching(marker))
    assert outcome.status == SUCCEEDED
    assert held  # the rest of the teardown has not run yet...
    assert processes_with_argument(marker) == []  # ...and nothing of the run is left


def test_it_leaves_no_process_after_drain(tmp_path: Path) -> None:
    marker = f"303.{uuid.uuid4().int % 10**9}"
    outcome = run_tool(tmp_path, "bash", detaching(marker))
    assert outcome.status == SUCCEEDED
    assert teardown.drain()
    assert processes_with_argument(marker) == []


def test_it_leaves_no_cgroup_after_drain(tmp_path: Path, made_cgroups: list[Path]) -> None:
    assert run_tool(tmp_path, "bash", "echo hi").status == SUCCEEDED
    require(not made_cgroups, "no cgroups on this host")
    assert teardown.drain()
    assert [path for path in made_cgroups if path.exists()] == []


@prerequisite(not ROOT, "the quota file system is mounted by a root worker")
def test_it_leaves_no_mount_after_drain(tmp_path: Path) -> None:
    assert run_tool(tmp_path, "bash", 'echo x > "$HOME/f"; echo hi').status == SUCCEEDED
    assert teardown.drain()
    assert quota_mounts(tmp_path) == []


def test_it_leaves_no_run_dir_after_drain(tmp_path: Path) -> None:
    assert run_tool(tmp_path, "bash", "echo hi").status == SUCCEEDED
    assert teardown.drain()
    assert run_dirs(tmp_path) == []


def test_it_frees_a_spares_run_after_drain(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, made_cgroups: list[Path]
) -> None:
    monkeypatch.setenv("TOOL_CONSOLE_SPARE_SANDBOXES", "on")
    standby.discard_spare()
    try:
        assert run_tool(tmp_path, "python", PYTHON_OK).status == SUCCEEDED
        outcome = run_tool(tmp_path, "python", PYTHON_OK)
        assert (outcome.status, outcome.spare) == (SUCCEEDED, True)
        assert teardown.drain()
        assert run_dirs(tmp_path) == []
    finally:
        standby.discard_spare()
    assert [path for path in made_cgroups if path.exists()] == []
    assert quota_mounts(tmp_path) == []


@prerequisite(not ROOT, "the quota file system is mounted by a root worker")
def test_it_leaves_the_run_behind_when_its_teardown_is_skipped(
    tmp_path: Path, held: list, made_cgroups: list[Path]
) -> None:
    """What the tests above look for is really there until the teardown runs: they would
    fail if a run skipped it."""
    assert run_tool(tmp_path, "bash", 'echo x > "$HOME/f"; echo hi').status == SUCCEEDED
    assert teardown.drain()  # nothing was queued
    assert len(run_dirs(tmp_path)) == 1
    assert len(quota_mounts(tmp_path)) == 1
    assert not made_cgroups or all(path.exists() for path in made_cgroups)
    for job in held:
        job()
    held.clear()
    assert run_dirs(tmp_path) == []
    assert quota_mounts(tmp_path) == []
    assert [path for path in made_cgroups if path.exists()] == []


def test_it_returns_the_outcome_without_waiting_for_the_teardown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker takes its next run while the last one is being freed."""
    gate = threading.Event()
    submit = teardown.submit

    def slow(job: Callable[[], None]) -> None:
        def later() -> None:
            gate.wait(30)
            job()

        submit(later)

    monkeypatch.setattr(teardown, "submit", slow)
    try:
        assert run_tool(tmp_path, "bash", "echo hi").status == SUCCEEDED
        assert teardown.pending() == 1
        assert len(run_dirs(tmp_path)) == 1
    finally:
        gate.set()
    assert teardown.drain()
    assert teardown.pending() == 0
    assert run_dirs(tmp_path) == []


def test_it_drains_the_teardowns_at_exit(tmp_path: Path) -> None:
    """A process that ends right after a run still frees it (atexit)."""
    folder = tmp_path / "tool"
    folder.mkdir()
    (folder / "index.sh").write_text('echo x > "$HOME/f"; echo hi\n')
    script = textwrap.dedent(
        f"""
        import sys
        from pathlib import Path
        from tools_app.runner import RunRequest, run, teardown
        teardown.submit(lambda: __import__("time").sleep(0.3))  # a backlog to wait for
        outcome = run(RunRequest(Path({str(folder)!r}), "bash", "index.sh", {{}}, "c", {{}},
                                 {{}}, work_root=Path({str(tmp_path / "runs" / "x")!r})))
        print(outcome.status, teardown.pending() > 0)
        """
    )
    env = {**os.environ, "TOOL_CONSOLE_SPARE_SANDBOXES": "off"}
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True
    )
    assert done.stdout.split() == [SUCCEEDED, "True"], done.stderr
    assert run_dirs(tmp_path) == []
    assert quota_mounts(tmp_path) == []


def test_a_celery_pool_process_drains_its_teardowns_at_shutdown() -> None:
    from console.celery import finish_teardowns

    ran = threading.Event()
    gate = threading.Event()

    def job() -> None:
        gate.wait(30)
        ran.set()

    teardown.submit(job)
    threading.Timer(0.05, gate.set).start()
    finish_teardowns()
    assert ran.is_set()
