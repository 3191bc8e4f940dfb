"""`python3 dev.py up` supervises its worker and web server: a killed worker is started
again (with a log line saying which process died and how), and SIGTERM stops everything,
leaving no process and no spare sandbox behind.

The console runs from this checkout on a throwaway state folder, data folder and port
(the SQLite database and embedded broker of the default install), as .ci/smoke_up.py does
on a clone."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tools_app.runner import isolation_level

REPO = Path(__file__).resolve().parents[2]
PY = Path(sys.executable)
UP_TIMEOUT = 600  # first start: migrations, assets, seed sync on a shared 2-core machine

pytestmark = pytest.mark.worker

TOOL_MD = """---
name: up_probe
description: Answers at once; proves that a worker serves runs.
language: python
---
# up_probe
"""
TOOL_PY = """
import os

def execute(tool_call_id, params, signal, on_update):
    return {"content": [{"type": "text", "text": "served"}]}
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Console:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.state = root / "state"
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log_path = root / "up.log"
        self.env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("CONSOLE_", "CELERY_", "DATABASE_URL", "DJANGO_", "DATA_PATH"))
        }
        self.env.update(
            CONSOLE_STATE_DIR=str(self.state),
            DATA_PATH=str(root / "data"),
            CONSOLE_WORKER_HEARTBEAT_SECONDS="1",
            WEB_CONCURRENCY="1",
            TOOL_CONSOLE_SPARE_SANDBOXES="on",  # as installed (the test process turns it off)
            PYTHONDONTWRITEBYTECODE="1",
        )
        self.proc: subprocess.Popen | None = None
        self.token = ""

    def up(self) -> None:
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                ["python3", "dev.py", "up", "--port", str(self.port), "--workers", "1"],
                cwd=REPO,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.wait_for(lambda: "Tool Console on http" in self.log(), UP_TIMEOUT, "dev.py up")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_for(self, ready, timeout: float, what: str):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc is not None and self.proc.poll() is None, self.log()[-6000:]
            value = ready()
            if value:
                return value
            time.sleep(0.2)
        raise AssertionError(f"{what} not reached in {timeout} s\n{self.log()[-6000:]}")

    def manage(self, *args: str) -> str:
        return subprocess.run(
            [str(REPO / ".venv" / "bin" / "python"), "manage.py", *args],
            cwd=REPO,
            env=self.env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout

    def api(self, method: str, path: str, body: dict | None = None) -> dict:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.base + path, data=data, method=method)
        request.add_header("Authorization", f"Bearer {self.token}")
        request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:
            return {"http_status": exc.code, **json.loads(exc.read() or b"{}")}

    def run_probe(self) -> dict:
        run = self.api("POST", "/api/v1/tools/up_probe/invoke", {"params": {}})
        assert "run" in run, run
        return self.wait_for(
            lambda: (
                (body := self.api("GET", f"/api/v1/runs/{run['run']}?wait=5"))["status"]
                not in ("queued", "running")
                and body
            ),
            180,
            "the probe run's end",
        )

    def children(self) -> dict[str, int]:
        """dev.py's direct children by kind: {"celery": pid, "gunicorn": pid}."""
        out = subprocess.run(
            ["ps", "-ww", "-o", "pid=,args=", "--ppid", str(self.proc.pid)],
            capture_output=True,
            text=True,
            check=False,
        ).stdout
        found = {}
        for line in out.splitlines():
            pid, _, args = line.strip().partition(" ")
            for kind in ("celery", "gunicorn"):
                if kind in args:
                    found[kind] = int(pid)
        return found


def processes_mentioning(text: str) -> list[str]:
    out = subprocess.run(
        ["ps", "-ww", "-eo", "pid,stat,args"], capture_output=True, text=True
    ).stdout
    return [
        line
        for line in out.splitlines()
        if text in line and "ps -eo" not in line and not line.split()[1].startswith("Z")
    ]


def health(console: Console) -> dict:
    return console.api("GET", "/api/v1/health")


def test_it_restarts_a_killed_worker_and_stops_cleanly(tmp_path):
    console = Console(tmp_path)
    tool = tmp_path / "tools" / "up_probe"
    tool.mkdir(parents=True)
    (tool / "TOOL.md").write_text(TOOL_MD)
    (tool / "index.py").write_text(TOOL_PY)
    try:
        console.up()
        console.manage("import_tools", str(tmp_path / "tools"), "--publish")
        console.token = console.manage(
            "create_agent_token", "up-test", "--scope", "tools:invoke"
        ).strip()
        assert console.run_probe()["status"] == "succeeded"
        first = console.wait_for(lambda: console.children().get("celery"), 30, "the worker")
        groups = {os.getpgid(pid) for pid in console.children().values()}

        os.kill(first, signal.SIGKILL)

        line = console.wait_for(
            lambda: re.search(
                rf"the celery worker \(pid {first}\) was killed by SIGKILL; restarting it in "
                r"[0-9.]+ s",
                console.log(),
            ),
            60,
            "the supervisor's log line",
        )
        assert line
        second = console.wait_for(
            lambda: (pid := console.children().get("celery")) != first and pid, 60, "a new worker"
        )
        groups.add(os.getpgid(second))
        # The new worker serves runs, and the health answer sees it alive.
        assert console.run_probe()["status"] == "succeeded"
        assert health(console)["workers"]["alive"] >= 1
        if isolation_level()[0] == "bwrap":  # both workers started a spare after a run
            assert list((console.state / "runs").glob("spare-*"))
    finally:
        if console.proc is not None and console.proc.poll() is None:
            console.proc.send_signal(signal.SIGTERM)
            console.proc.wait(timeout=120)
    assert console.proc.returncode == 0, console.log()[-4000:]
    # Nothing of the console is left running: no process of its groups (a zombie is dead
    # already; reaping orphans is the init process's job), nothing naming its state.
    leftovers = [
        row
        for row in subprocess.run(
            ["ps", "-ww", "-eo", "pgid=,pid=,stat=,args="], capture_output=True, text=True
        ).stdout.splitlines()
        if int(row.split()[0]) in groups and not row.split()[2].startswith("Z")
    ]
    assert leftovers == []
    assert processes_mentioning(str(console.state)) == []
    assert not list((console.state / "runs").glob("spare-*"))


def test_it_takes_its_children_down_when_it_is_killed(tmp_path):
    """SIGKILL reaches dev.py's own code never: its web server and worker must still not
    outlive it (they get SIGTERM from the kernel, PR_SET_PDEATHSIG)."""
    console = Console(tmp_path)
    groups: set[int] = set()
    try:
        console.up()
        found = console.wait_for(
            lambda: len(kids := console.children()) == 2 and kids, 60, "web and worker"
        )
        groups |= {os.getpgid(pid) for pid in found.values()}

        os.kill(console.proc.pid, signal.SIGKILL)
        console.proc.wait(timeout=10)

        deadline = time.monotonic() + 60
        while (left := in_groups(groups)) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert left == []
        assert processes_mentioning(str(console.state)) == []
    finally:
        for group in groups:  # what a failed assertion left
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(group, signal.SIGKILL)
        if console.proc is not None and console.proc.poll() is None:
            console.proc.kill()
            console.proc.wait()


def in_groups(groups: set[int]) -> list[str]:
    """Live (not zombie) processes of these process groups."""
    rows = subprocess.run(
        ["ps", "-ww", "-eo", "pgid=,pid=,stat=,args="], capture_output=True, text=True
    ).stdout.splitlines()
    return [row for row in rows if int(row.split()[0]) in groups and row.split()[2][0] != "Z"]
