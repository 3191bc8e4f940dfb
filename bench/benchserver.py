"""Starting and stopping the console's gunicorn for the benchmarks (run as bench/*.py)."""

from __future__ import annotations

import http.client
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def console_env(workdir: Path, *, web_workers: int) -> dict[str, str]:
    """Environment of a throwaway console in `workdir`: SQLite, its own state dir and
    DATA_PATH, no seed tools, quiet logs."""
    (workdir / "seed" / "tools").mkdir(parents=True)
    return {
        "DJANGO_SETTINGS_MODULE": "console.settings",
        "DATABASE_URL": f"sqlite:///{workdir / 'console.sqlite3'}",
        "CONSOLE_STATE_DIR": str(workdir / "state"),
        "DATA_PATH": str(workdir / "data"),
        "CONSOLE_SEED_PATH": str(workdir / "seed"),
        "CONSOLE_SYNC_ON_START": "0",
        "CONSOLE_SECRET_KEY": secrets.token_urlsafe(50),
        "CONSOLE_HTTPS": "0",  # plain HTTP on 127.0.0.1
        "CONSOLE_ALLOWED_HOSTS": "127.0.0.1,localhost",
        "CONSOLE_DEBUG": "0",
        "CONSOLE_LOG_LEVEL": "WARNING",
        "WEB_CONCURRENCY": str(web_workers),
    }


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_gunicorn(
    env: dict[str, str], port: int, workdir: Path, *, workers: int, access_log: bool = True
) -> subprocess.Popen:
    """gunicorn with the project's config; output goes to workdir/gunicorn.log."""
    argv = [
        venv_command("gunicorn"),
        "console.asgi:application",
        "-c",
        "console/gunicorn.conf.py",
        "--workers",
        str(workers),
        "--bind",
        f"127.0.0.1:{port}",
    ]
    if not access_log:
        argv += ["--access-logfile", "/dev/null"]
    return spawn(argv, env, workdir / "gunicorn.log")


def celery_worker(
    env: dict[str, str], log: Path, *options: str, concurrency: int, append: bool = False
) -> subprocess.Popen:
    """A Celery worker of the console in `env` (see spawn), with `options` after the usual."""
    argv = [venv_command("celery"), "-A", "console", "worker", "--loglevel", "WARNING"]
    argv += ["--concurrency", str(concurrency), *options]
    return spawn(argv, env, log, append=append)


def venv_command(name: str) -> str:
    """A console script (gunicorn, celery) of the Python running the benchmark."""
    return str(Path(sys.executable).with_name(name))


def spawn(
    argv: list[str], env: dict[str, str], log: Path, *, append: bool = False
) -> subprocess.Popen:
    """`argv` run in the repository with `env` on top of ours, its output to `log`, in a
    process group of its own (stop() ends the group: a worker's tools too)."""
    out = open(log, "ab" if append else "wb")  # noqa: SIM115 (closed with the process)
    return subprocess.Popen(
        argv,
        cwd=REPO,
        env={**os.environ, **env},
        stdout=out,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def stop(process: subprocess.Popen) -> None:
    """SIGTERM the process's group (started with start_new_session), SIGKILL after 20 s."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        kill(process)


def kill(process: subprocess.Popen) -> None:
    """SIGKILL the process's group (started with start_new_session) and reap it."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    process.wait()


def wait_until_up(port: int, workdir: Path) -> None:
    """Until GET /api/healthz answers 200 (a minute at most)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        try:
            conn.request("GET", "/api/healthz")
            if conn.getresponse().status == 200:
                return
        except OSError:
            pass
        finally:
            conn.close()
        time.sleep(0.1)
    raise SystemExit(f"gunicorn did not start; see {workdir / 'gunicorn.log'} (use --keep)")


def lookup_tool_files(name: str, version: int = 1) -> dict[str, bytes]:
    """A published-looking TypeScript lookup tool's files (TOOL.md and index.ts), as the
    analytics and backup benches save them."""
    toolmd = f"""---
name: {name}
label: {name.replace("_", " ").title()}
description: Looks things up for the agent (version {version}); returns text, changes nothing.
version: {version}
language: typescript
timeout: 60
inputs:
  query:
    type: string
    description: What to look for.
  limit:
    type: integer
    description: How many results.
    optional: true
    default: 10
---

# {name}

Call it with a query. It answers with **text**: a few lines per result.
"""
    entry = (
        "export async function execute(toolCallId: string, params: any) {\n"
        "  return { content: [{ type: 'text', text: 'ok' }] };\n}\n"
    )
    return {"TOOL.md": toolmd.encode(), "index.ts": entry.encode()}
