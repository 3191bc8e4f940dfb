"""The CPU limit per run (CONSOLE_RUNNER_CPUS): a cgroup's cpu.max (cgroup v1:
cpu.cfs_quota_us) over all the run's processes, cold or in a spare sandbox, seen from the
host while the tool runs. A tool over it is slowed down, not stopped; a run without a cpu
cgroup says so (runner/cgroups.py)."""

from __future__ import annotations

import textwrap
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import Client
from django.urls import reverse

from console.settings import envcpus
from tests.support import require, unprivileged
from tools_app.audit import Actor
from tools_app.models import WorkerHeartbeat
from tools_app.models.runs import RunVia
from tools_app.ops.heartbeat import Beater
from tools_app.runner import (
    SUCCEEDED,
    Limits,
    RunOutcome,
    RunRequest,
    cgroups,
    isolation_level,
    run,
    standby,
)
from tools_app.runs import execute as run_execute
from tools_app.runs import start

HALF = Limits(timeout=120, grace_seconds=1, cpus=0.5)
# 5 ms of CPU per 100 ms: the busy tools below hit it even on a machine loaded enough that
# a larger share would never be used up (then nothing is throttled).
TINY = Limits(timeout=120, grace_seconds=1, cpus=0.05)
ENTRY = {"python": "index.py", "bash": "index.sh"}
# Four busy processes, a fixed amount of work each; an update once they all started.
BUSY_PY = """
    import os

    def execute(tool_call_id, params, signal, on_update):
        children = []
        for _ in range(4):
            pid = os.fork()
            if pid == 0:
                n = 0
                for i in range(1_000_000):
                    n += i
                os._exit(0)
            children.append(pid)
        on_update({"content": [{"type": "text", "text": "busy"}]})
        codes = [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in children]
        return {"content": [{"type": "text", "text": f"done {codes}"}]}
    """
BUSY_SH = """
    for n in 1 2 3 4; do
      ( i=0; while [ $i -lt 30000 ]; do i=$((i+1)); done ) &
    done
    echo busy >&3
    wait
    echo done
    """


def make_tool(tmp_path: Path, language: str, source: str) -> Path:
    folder = tmp_path / "tools" / uuid.uuid4().hex[:8]
    folder.mkdir(parents=True)
    (folder / ENTRY[language]).write_text(textwrap.dedent(source))
    return folder


def run_tool(
    tmp_path: Path, language: str, source: str, on_update=None, limits: Limits = HALF
) -> RunOutcome:
    request = RunRequest(
        tool_dir=make_tool(tmp_path, language, source),
        language=language,
        entry=ENTRY[language],
        params={},
        tool_call_id=f"call-{uuid.uuid4().hex[:8]}",
        env={},
        secrets={},
        limits=limits,
        work_root=tmp_path / "runs" / uuid.uuid4().hex[:8],
    )
    return run(request, on_update=on_update)


def cpu_max(cgroup: cgroups.RunCgroup) -> str:
    """The cgroup's CPU limit as cgroup v2 writes it ("50000 100000"), read from the host."""
    version, path = cgroup._dirs["cpu"]
    if version == 2:
        return (path / "cpu.max").read_text().strip()
    quota = (path / "cpu.cfs_quota_us").read_text().strip()
    return f"{quota} {(path / 'cpu.cfs_period_us').read_text().strip()}"


def texts(outcome: RunOutcome) -> str:
    return "\n".join(item["text"] for item in outcome.result["content"])


@pytest.fixture
def bwrap() -> None:
    require(isolation_level()[0] != "bwrap", "the CPU limit tests need bubblewrap")


@pytest.fixture
def made(monkeypatch: pytest.MonkeyPatch) -> list[cgroups.RunCgroup]:
    """Every cgroup made for a run from now on."""
    found: list[cgroups.RunCgroup] = []
    create = cgroups.create

    def recording(*args: Any, **kwargs: Any) -> cgroups.RunCgroup | None:
        cgroup = create(*args, **kwargs)
        if cgroup is not None:
            found.append(cgroup)
        return cgroup

    monkeypatch.setattr(cgroups, "create", recording)
    return found


def require_cpu_cgroup() -> None:
    reason = cgroups.cpu_unlimited_reason(None) if "cpu" not in cgroups._hierarchies() else ""
    require(bool(reason), f"this host gives the root worker no cpu cgroup: {reason}")


def test_it_slows_a_cold_bash_run_down_to_its_cpu_limit(
    tmp_path: Path, bwrap: None, made: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_cpu_cgroup()
    monkeypatch.setenv("TOOL_CONSOLE_SPARE_SANDBOXES", "off")
    seen: list[str] = []

    def on_update(update: dict[str, Any]) -> None:
        (cgroup,) = made
        seen.append(cpu_max(cgroup))

    outcome = run_tool(tmp_path, "bash", BUSY_SH, on_update=on_update, limits=TINY)

    assert outcome.status == SUCCEEDED, outcome
    assert texts(outcome).strip() == "done"  # every busy loop ran to its end: slowed, not killed
    assert seen == ["5000 100000"]
    assert outcome.cpu_limit == "0.05 CPU"
    assert "the tool was slowed down to its CPU limit (0.05 CPU)" in outcome.notices


def test_it_slows_a_run_in_a_spare_sandbox_down_to_its_cpu_limit(
    tmp_path: Path, bwrap: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_cpu_cgroup()
    monkeypatch.setenv("TOOL_CONSOLE_SPARE_SANDBOXES", "on")
    # An earlier test's spare (another shape) must not pass for this test's own.
    standby.discard_spare()
    try:
        idle = "def execute(*a):\n    return {'content': []}\n"
        warm = run_tool(tmp_path, "python", idle, limits=TINY)
        assert warm.status == SUCCEEDED, warm

        def ours() -> standby.Sandbox | None:
            spare = standby._keeper.spare
            return spare if spare is not None and spare.shape.folder == tmp_path / "runs" else None

        # Waited for here, however loaded the machine: the run below must find it ready
        # (a run waits only as long as a cold start would take, then starts cold).
        deadline = time.monotonic() + 120
        while ours() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        spare = ours()
        assert spare is not None and spare.cgroup is not None
        seen: list[str] = []

        outcome = run_tool(
            tmp_path,
            "python",
            BUSY_PY,
            on_update=lambda _: seen.append(cpu_max(spare.cgroup)),
            limits=TINY,
        )
    finally:
        standby.discard_spare()

    assert outcome.spare, outcome
    assert outcome.status == SUCCEEDED, outcome
    assert texts(outcome) == "done [0, 0, 0, 0]"
    assert seen == ["5000 100000"]
    assert outcome.cpu_limit == "0.05 CPU"
    assert "the tool was slowed down to its CPU limit (0.05 CPU)" in outcome.notices


@unprivileged.when_root
def test_it_says_so_when_a_non_root_worker_has_no_cpu_cgroup(tmp_path: Path, bwrap: None) -> None:
    outcome = run_tool(tmp_path, "bash", BUSY_SH)

    assert outcome.status == SUCCEEDED, outcome
    if outcome.cpu_limit != "0.5 CPU":  # a host may delegate a cgroup to the worker's user
        assert outcome.cpu_limit == "none"
        reason = cgroups.cpu_unlimited_reason(None)
        assert f"the CPU limit (0.5 CPU) is not enforced on this run: {reason}" in outcome.notices


def test_it_says_so_when_cgroups_are_off(
    tmp_path: Path, bwrap: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOL_CONSOLE_CGROUPS", "off")
    monkeypatch.setenv("TOOL_CONSOLE_SPARE_SANDBOXES", "off")

    outcome = run_tool(tmp_path, "bash", BUSY_SH)

    assert outcome.status == SUCCEEDED, outcome
    assert outcome.cpu_limit == "none"
    notice = (
        "the CPU limit (0.5 CPU) is not enforced on this run: "
        "cgroups are disabled by TOOL_CONSOLE_CGROUPS"
    )
    assert notice in outcome.notices


@pytest.mark.parametrize(
    ("raw", "cpus"), [("1", 1.0), ("0.5", 0.5), (" 2 ", 2.0), ("0.01", 0.01), ("1e0", 1.0)]
)
def test_it_reads_cpus_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, raw: str, cpus: float
) -> None:
    monkeypatch.setenv("CONSOLE_RUNNER_CPUS", raw)
    assert envcpus("CONSOLE_RUNNER_CPUS", "1") == cpus


@pytest.mark.parametrize("raw", ["", "one", "0", "-1", "0.001", "nan", "inf", "1,5", "5000"])
def test_it_refuses_a_bad_cpus_setting(monkeypatch: pytest.MonkeyPatch, raw: str) -> None:
    monkeypatch.setenv("CONSOLE_RUNNER_CPUS", raw)
    with pytest.raises(ImproperlyConfigured, match="CONSOLE_RUNNER_CPUS must be a number of CPUs"):
        envcpus("CONSOLE_RUNNER_CPUS", "1")


def test_it_turns_cpus_into_a_quota_per_period() -> None:
    assert Limits(cpus=1).cpu_quota_us == 100_000
    assert Limits(cpus=0.5).cpu_quota_us == 50_000
    assert Limits(cpus=2).cpu_quota_us == 200_000
    assert Limits(cpus=0.01).cpu_quota_us == 1_000


@pytest.mark.django_db
def test_the_run_page_shows_the_cpu_limit(
    developer_client, make_tool, settings, bwrap: None
) -> None:
    require_cpu_cgroup()
    settings.RUNNER_CPUS = 0.5
    source = "def execute(tool_call_id, params, signal, on_update):\n    return {'content': []}\n"
    tool = make_tool("cpu_shown", language="python", source=source)

    queued = start.start_run(
        tool.published_version, {}, actor=Actor(user=None), via=RunVia.BROWSER, enqueue=False
    )
    finished = run_execute.execute_run(queued.pk)

    page = developer_client.get(reverse("run", args=[finished.pk])).content.decode()
    assert finished.cpu_limit == "0.5 CPU"
    assert "CPU limit: 0.5 CPU, over all the tool" in page


@pytest.mark.django_db
def test_the_run_page_says_when_a_run_had_no_cpu_limit(
    developer_client, make_tool, monkeypatch: pytest.MonkeyPatch, bwrap: None
) -> None:
    monkeypatch.setenv("TOOL_CONSOLE_CGROUPS", "off")
    source = "def execute(tool_call_id, params, signal, on_update):\n    return {'content': []}\n"
    tool = make_tool("cpu_none", language="python", source=source)

    queued = start.start_run(
        tool.published_version, {}, actor=Actor(user=None), via=RunVia.BROWSER, enqueue=False
    )
    finished = run_execute.execute_run(queued.pk)

    page = developer_client.get(reverse("run", args=[finished.pk])).content.decode()
    assert finished.cpu_limit == "none"
    assert "CPU limit: none" in page
    assert any(
        n.startswith("the CPU limit (1 CPU) is not enforced on this run: ")
        for n in finished.notices
    )


@pytest.fixture
def admin_client(console_admin) -> Client:
    client = Client()
    client.force_login(console_admin)
    return client


def beat_once(name: str) -> WorkerHeartbeat:
    """A worker's real heartbeat thread, until its row is there (it forgets it at stop)."""
    beater = Beater(name, "console", 1)
    beater.start()
    try:
        deadline = time.monotonic() + 30
        while not (row := WorkerHeartbeat.objects.filter(name=name).first()):
            assert time.monotonic() < deadline, "no heartbeat"
            time.sleep(0.02)
        return row
    finally:
        beater.stop()


@pytest.mark.django_db(transaction=True)
def test_the_system_page_shows_each_workers_cpu_limit(admin_client) -> None:
    require_cpu_cgroup()

    row = beat_once("celery@cpu-limited")
    row.pk = None
    row.save()  # the stopped beater forgot its row; the page shows it as a live worker's
    page = admin_client.get(reverse("system")).content.decode()

    assert row.cpu_limit == "1 CPU per run"
    assert 'data-label="CPU limit">1 CPU per run</td>' in page


@pytest.mark.django_db(transaction=True)
def test_the_system_page_says_when_a_worker_gives_runs_no_cpu_limit(
    admin_client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOL_CONSOLE_CGROUPS", "off")

    row = beat_once("celery@cpu-unlimited")
    row.pk = None
    row.save()
    page = admin_client.get(reverse("system")).content.decode()

    assert row.cpu_limit == "none: cgroups are disabled by TOOL_CONSOLE_CGROUPS"
    assert (
        'data-label="CPU limit" class="error">none: cgroups are disabled by TOOL_CONSOLE_CGROUPS'
        "</td>"
    ) in page


def test_it_keeps_a_run_within_a_cpu_limited_worker_on_cgroup_v1(tmp_path: Path) -> None:
    """cgroup v1 refuses a child quota above the parent's (EINVAL): a worker limited to
    0.2 CPU (a container's --cpus) gives its runs 0.2 CPU rather than none."""
    hierarchy = cgroups._hierarchies().get("cpu")
    require(hierarchy is None or hierarchy.version != 1, "no cgroup v1 cpu hierarchy here")
    assert hierarchy is not None
    parent = hierarchy.own_dir / f"{cgroups.PREFIX}test-{uuid.uuid4().hex[:8]}"
    parent.mkdir()
    try:
        (parent / "cpu.cfs_quota_us").write_text("20000")
        limited = cgroups._Hierarchy(1, parent)
        child = cgroups._make("cpu", limited, "run", {"cpu": Limits(cpus=2).cpu_quota_us})
        assert (child / "cpu.cfs_quota_us").read_text().strip() == "20000"
    finally:
        for path in (parent / "run", parent):
            if path.exists():
                path.rmdir()
