#!/usr/bin/env python3
"""Exercise the production topology docs/operations.md ("Production") describes: PostgreSQL,
Redis, gunicorn, two `celery worker` processes and one `celery beat`, each started as the
docs say, with production settings (a fresh database, a Redis DB of its own, each
process with a state dir of its own). Then a smoke test through it: an admin made with
manage.py logs in through the login page, creates an agent token, runs a tool through the
API and downloads the artifact a worker made; a worker is SIGKILLed in the middle of a run,
which the reaper (via beat) marks `lost`; the next run succeeds on the other worker.
Everything is torn down at the end, leaving no process. Exit 0 when all of that held.

Run with the project's virtualenv: .venv/bin/python .ci/prod_smoke.py (needs PostgreSQL on
127.0.0.1:5432 and Redis on 127.0.0.1:6379, as .ci/run provides).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import http.cookies
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import psycopg
import redis
from cryptography.fernet import Fernet

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
PG_ADMIN = os.environ.get("SMOKE_PG_ADMIN_URL", "postgres://postgres@127.0.0.1:5432/postgres")
REDIS_DB = int(os.environ.get("SMOKE_REDIS_DB", "13"))  # the tests use 15, bench/ 14
LOST_AFTER = 6
PR_SET_CHILD_SUBREAPER = 36  # <linux/prctl.h>

SLEEPY_TOOL = """\
---
name: smoke_sleep
description: Sleeps, then writes a report artifact (the production smoke test's tool).
language: python
network: false
timeout: 300
inputs:
  seconds:
    type: number
    description: How long to sleep.
---
# smoke_sleep

Sleeps for `seconds`, then writes `report.txt` into its output folder.
"""
SLEEPY_PY = """\
import os
import time


def execute(tool_call_id, params, signal, on_update):
    on_update({"content": [{"type": "text", "text": "sleeping"}]})
    time.sleep(float(params["seconds"]))
    with open(os.path.join(os.environ["TOOL_OUTPUT_DIR"], "report.txt"), "w") as f:
        f.write(f"report of {tool_call_id}")
    return {"content": [{"type": "text", "text": f"slept {params['seconds']} s"}]}
"""


def say(message: str) -> None:
    print(f"--> {message}", flush=True)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Topology:
    """The processes, each in a session of its own so that a kill reaches its children."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.port = free_port()
        self.db_name = f"prod_smoke_{secrets.token_hex(4)}"
        self.env = {
            **{
                k: v
                for k, v in os.environ.items()
                if not k.startswith(("CONSOLE_", "DATABASE_URL", "CELERY_", "DJANGO_"))
            },
            "CONSOLE_DEBUG": "False",
            "CONSOLE_SECRET_KEY": secrets.token_urlsafe(50),
            "CONSOLE_ENCRYPTION_KEYS": Fernet.generate_key().decode(),
            "CONSOLE_ALLOWED_HOSTS": "127.0.0.1",
            "DATABASE_URL": PG_ADMIN.rsplit("/", 1)[0] + "/" + self.db_name,
            "CELERY_BROKER_URL": f"redis://127.0.0.1:6379/{REDIS_DB}",
            "DATA_PATH": str(work / "data"),
            "CONSOLE_RUN_LOST_AFTER_SECONDS": str(LOST_AFTER),
            "CONSOLE_RUN_HEARTBEAT_SECONDS": "1",
            "CONSOLE_LOG_LEVEL": "WARNING",
            "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        }
        self.procs: dict[str, subprocess.Popen] = {}
        # Every process seen under ours (the runner's bwrap and tools start sessions of
        # their own, so a process group does not hold them): none may outlive teardown.
        self.seen: set[tuple[int, str]] = set()

    def snapshot(self) -> None:
        # Our own pid too: orphans of a killed worker are reparented to us (subreaper).
        roots = {proc.pid for proc in self.procs.values()} | {os.getpid()}
        self.seen |= {seen for seen in descendants(roots) if seen[0] != os.getpid()}

    def env_of(self, role: str) -> dict[str, str]:
        state = self.work / f"state-{role}"
        state.mkdir(exist_ok=True)
        return {**self.env, "CONSOLE_STATE_DIR": str(state)}

    def manage(self, *args: str, **kw) -> subprocess.CompletedProcess:
        return subprocess.run(
            [BIN / "python", "manage.py", *args],
            cwd=ROOT,
            env={**self.env_of("web"), **kw.pop("env", {})},
            check=True,
            capture_output=True,
            text=True,
            timeout=300,
            **kw,
        )

    def start(self, role: str, argv: list[str]) -> None:
        log = open(self.work / f"{role}.log", "wb")  # noqa: SIM115 (closed with the process)
        self.procs[role] = subprocess.Popen(
            argv,
            cwd=ROOT,
            env=self.env_of(role),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def log(self, role: str) -> str:
        return (self.work / f"{role}.log").read_text(errors="replace")[-3000:]

    def create_database(self) -> None:
        with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{self.db_name}"')
        redis.Redis.from_url(self.env["CELERY_BROKER_URL"]).flushdb()

    def drop_database(self) -> None:
        with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{self.db_name}" WITH (FORCE)')
        redis.Redis.from_url(self.env["CELERY_BROKER_URL"]).flushdb()

    def stop_all(self) -> list[str]:
        """SIGTERM every group, SIGKILL what is left after 30 s; the roles that left a
        process behind (there should be none)."""
        for proc in self.procs.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 30
        for proc in self.procs.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        # Children of a group leader that exited, and processes torn down with a killed
        # sandbox (whose cmdline is already empty), take a moment to be gone.
        settle = time.monotonic() + 10
        while (running := self.running()) and time.monotonic() < settle:
            time.sleep(0.1)
        for kill in running.values():
            kill()
        return list(running)

    def running(self) -> dict[str, Callable[[], None]]:
        """What still runs (a zombie has exited), each with a way to kill it."""
        reap_orphans()
        live = {pid: fields for pid, fields in _processes().items() if fields[0] != "Z"}
        groups = {int(fields[2]) for fields in live.values()}
        found = {}
        for role, proc in self.procs.items():
            if proc.pid in groups:
                found[role] = functools.partial(os.killpg, proc.pid, signal.SIGKILL)
        for pid, started in self.seen:
            if (fields := live.get(pid)) and fields[19] == started:
                what = f"pid {pid} ({fields[0]}, parent {fields[1]}: {_cmdline(pid)[:80]})"
                found[what] = functools.partial(os.kill, pid, signal.SIGKILL)
        return found


def become_subreaper() -> None:
    """Have the orphans of what we start reparented to us rather than to PID 1, so that
    we reap them: an exited orphan waiting on a slow (or absent) init is a zombie, which
    has exited and holds nothing, but looks like a process left behind."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")


def reap_orphans() -> None:
    """Collect every child of ours that has exited (Popen's own are waited already)."""
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass


def _stat(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return raw[raw.rindex(")") + 2 :].split()  # fields from state on; comm may hold spaces


def _processes() -> dict[int, list[str]]:
    """The stat fields (from state on) of every process, read once."""
    pids = (int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit())
    return {pid: fields for pid in pids if (fields := _stat(pid))}


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return "?"


def descendants(roots: set[int]) -> set[tuple[int, str]]:
    """(pid, start time) of every live process below `roots`, the roots included."""
    parent = {pid: (int(fields[1]), fields[19]) for pid, fields in _processes().items()}
    found, changed = set(roots), True
    while changed:
        new = {pid for pid, (ppid, _) in parent.items() if ppid in found} - found
        found |= new
        changed = bool(new)
    return {(pid, parent[pid][1]) for pid in found if pid in parent}


class Browser:
    """HTTP to gunicorn as a TLS-terminating proxy would forward it (X-Forwarded-Proto),
    keeping cookies by hand: they are Secure, and this hop is plain HTTP."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.origin = base.replace("http://", "https://")
        self.client = httpx.Client(base_url=base, timeout=30, follow_redirects=False)
        self.cookies: dict[str, str] = {}

    def request(self, method: str, path: str, **kw) -> httpx.Response:
        headers = {"X-Forwarded-Proto": "https", **kw.pop("headers", {})}
        if self.cookies:
            headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        if method == "POST":
            headers.update({"Origin": self.origin, "Referer": self.origin + path})
            if "csrftoken" in self.cookies:
                headers["X-CSRFToken"] = self.cookies["csrftoken"]
        response = self.client.request(method, path, headers=headers, **kw)
        for raw in response.headers.get_list("set-cookie"):
            jar = http.cookies.SimpleCookie()
            jar.load(raw)
            for name, morsel in jar.items():
                assert morsel["secure"], f"cookie {name} is not Secure"
                self.cookies[name] = morsel.value
        return response

    def form_token(self, path: str) -> str:
        page = self.request("GET", path)
        assert page.status_code == 200, (path, page.status_code)
        found = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
        assert found, f"no CSRF token on {path}"
        return found.group(1)


def wait_until(what: str, check, timeout: float) -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := check():
            return value
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def run_status(agent: httpx.Client, run_id: str) -> dict:
    response = agent.get(f"/api/v1/runs/{run_id}")
    assert response.status_code == 200, response.text
    return response.json()


def worker_pid(topo: Topology, run_id: str) -> int:
    with psycopg.connect(topo.env["DATABASE_URL"]) as conn:
        row = conn.execute("SELECT worker FROM tools_app_run WHERE id = %s", (run_id,)).fetchone()
    return int(row[0].rsplit(":", 1)[1])


def role_of(topo: Topology, pid: int) -> str:
    group = os.getpgid(pid)
    return next(role for role, proc in topo.procs.items() if proc.pid == group)


def smoke(topo: Topology) -> None:
    py = str(BIN / "python")
    celery = str(BIN / "celery")
    say(f"database {topo.db_name}, broker {topo.env['CELERY_BROKER_URL']}")
    topo.create_database()
    # The deploy steps of docs/operations.md.
    topo.manage("migrate", "--noinput")
    topo.manage("signing_keys", "create", "--if-missing")
    topo.manage("collectstatic", "--noinput")
    topo.manage("check", "--deploy", "--fail-level", "WARNING")
    password = secrets.token_urlsafe(16)
    topo.manage(
        "createsuperuser",
        "--noinput",
        "--username",
        "admin",
        "--email",
        "admin@example.com",
        env={"DJANGO_SUPERUSER_PASSWORD": password},
    )
    tool = topo.work / "tools" / "smoke_sleep"
    tool.mkdir(parents=True)
    (tool / "TOOL.md").write_text(SLEEPY_TOOL)
    (tool / "index.py").write_text(SLEEPY_PY)
    topo.manage("import_tools", str(tool.parent), "--publish")

    topo.start(
        "web",
        [py, "-m", "gunicorn", "console.asgi:application", "-c", "console/gunicorn.conf.py"]
        + ["--bind", f"127.0.0.1:{topo.port}"],
    )
    for name in ("worker1", "worker2"):
        topo.start(
            name,
            [celery, "-A", "console", "worker", "--concurrency", "1", "-n", f"{name}@%h"]
            + ["--loglevel", "INFO"],
        )
    beat_state = topo.work / "state-beat"
    beat_state.mkdir()
    topo.start(
        "beat",
        [celery, "-A", "console", "beat", "--schedule", str(beat_state / "celerybeat-schedule")]
        + ["--loglevel", "INFO"],
    )
    base = f"http://127.0.0.1:{topo.port}"
    wait_until("gunicorn", lambda: _answers(base), 60)
    for name in ("worker1", "worker2"):
        wait_until(f"{name} ready", lambda n=name: "ready." in topo.log(n), 90)
    say("gunicorn, two workers and beat are up")

    browser = Browser(base)
    assert browser.request("GET", "/tools/").status_code == 302  # to the login page
    token = browser.form_token("/accounts/login/")
    login = browser.request(
        "POST",
        "/accounts/login/",
        data={"username": "admin", "password": password, "csrfmiddlewaretoken": token},
    )
    assert login.status_code == 302 and "sessionid" in browser.cookies, login.status_code
    assert browser.request("GET", "/tools/").status_code == 200
    say("logged in through the login page")

    token = browser.form_token("/tokens/new/")
    created = browser.request(
        "POST",
        "/tokens/new/",
        data={"name": "smoke agent", "scopes": ["tools:invoke"], "csrfmiddlewaretoken": token},
    )
    # POST-redirect-GET: the token is shown once, by the page the POST redirects to.
    assert created.status_code == 302, created.status_code
    shown = browser.request("GET", created.headers["location"])
    found = re.search(r'id="raw-token"[^>]*value="([^"]+)"', shown.text)
    assert shown.status_code == 200 and found, shown.status_code
    agent = httpx.Client(
        base_url=base,
        timeout=30,
        headers={"Authorization": f"Bearer {found.group(1)}", "X-Forwarded-Proto": "https"},
    )
    say("created an agent token on the tokens page")

    def invoke(seconds: float) -> str:
        body = {"params": {"seconds": seconds}}
        response = agent.post("/api/v1/tools/smoke_sleep/invoke", json=body)
        assert response.status_code in (200, 201, 202), response.text
        return response.json()["run"]

    def finished(run_id: str, timeout: float = 120) -> dict:
        return wait_until(
            f"run {run_id} to end",
            lambda: (s := run_status(agent, run_id))["finished_at"] and s,
            timeout,
        )

    first = finished(invoke(0))
    assert first["status"] == "succeeded", first
    assert first["result"]["content"][0]["text"] == "slept 0 s"
    [artifact] = first["artifacts"]
    download = agent.get(artifact["url"])
    assert download.status_code == 200 and download.content == f"report of {first['id']}".encode()
    ran_on = role_of(topo, worker_pid(topo, first["id"]))
    assert not list((topo.work / "state-web").glob("artifacts/*"))
    say(f"a run succeeded on {ran_on}; its artifact downloaded through the web server")

    doomed = invoke(120)
    wait_until("the run to start", lambda: run_status(agent, doomed)["status"] == "running", 60)
    victim = role_of(topo, worker_pid(topo, doomed))
    topo.snapshot()
    os.killpg(topo.procs[victim].pid, signal.SIGKILL)
    topo.procs[victim].wait()
    say(f"SIGKILLed {victim} in the middle of run {doomed}")
    lost = wait_until(
        "the reaper to mark the run lost",
        lambda: (s := run_status(agent, doomed))["status"] == "lost" and s,
        LOST_AFTER + 60,
    )
    assert lost["finished_at"], lost
    say("the reaper (through beat) marked it lost")

    after = finished(invoke(0))
    assert after["status"] == "succeeded", after
    survivor = role_of(topo, worker_pid(topo, after["id"]))
    assert survivor != victim, survivor
    download = agent.get(after["artifacts"][0]["url"])
    assert download.status_code == 200 and download.content == f"report of {after['id']}".encode()
    say(f"the next run succeeded on {survivor}")


def _answers(base: str) -> bool:
    try:
        return httpx.get(f"{base}/api/healthz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def main() -> int:
    become_subreaper()
    work = Path(tempfile.mkdtemp(prefix="prod-smoke-"))
    topo = Topology(work)
    ok = False
    try:
        smoke(topo)
        ok = True
    except Exception as exc:  # report, then tear down
        print(f"FAILED: {type(exc).__name__}: {exc}", file=sys.stderr)
        for role in topo.procs:
            print(f"--- {role} log (end) ---\n{topo.log(role)}", file=sys.stderr)
    finally:
        topo.snapshot()
        left = topo.stop_all()
        try:
            topo.drop_database()
        except Exception as exc:
            print(f"FAILED: could not drop {topo.db_name}: {exc}", file=sys.stderr)
            ok = False
        if left:
            print(f"FAILED: processes left behind by {', '.join(left)}", file=sys.stderr)
            ok = False
        else:
            say("torn down: no process left")
        if ok:
            shutil.rmtree(work, ignore_errors=True)
    print("production smoke test " + ("passed" if ok else f"FAILED (logs in {work})"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
