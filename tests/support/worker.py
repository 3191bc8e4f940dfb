"""A real Celery worker for tests marked `worker` and `browser` (loaded by tests/conftest.py).

The worker is a `celery -A console worker` subprocess on its own queue, against Redis when
one answers on 127.0.0.1:6379 (required when CI=true) and otherwise kombu's filesystem
transport in a temporary folder. It must see the test database: a file SQLite database
(CONSOLE_TEST_DB_NAME, which `dev.py test` sets) or PostgreSQL (DATABASE_URL). With an
in-memory SQLite test database the worker tests are skipped, except in CI where that is a
failure. Nothing here mocks the worker or the runner.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from cryptography.fernet import Fernet

from tests.support import REPO, in_ci, require

CELERY = Path(sys.executable).with_name("celery")
GUNICORN = Path(sys.executable).with_name("gunicorn")
REDIS_URL = os.environ.get("TEST_CELERY_REDIS_URL", "redis://127.0.0.1:6379/15")
READY_TIMEOUT = 90


def skip_or_fail(reason: str) -> None:
    """Skip locally; in CI a missing prerequisite is a failure, never a silent skip."""
    require(True, reason)


def redis_reachable(url: str = REDIS_URL) -> bool:
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 6379), 1):
            return True
    except OSError:
        return False


def worker_database_url() -> str | None:
    """DATABASE_URL that points the worker at the test database, or None when the worker
    cannot share it (an in-memory SQLite database)."""
    from django.db import connection

    db = connection.settings_dict
    name = str(db["NAME"])
    if connection.vendor == "sqlite":
        if connection.is_in_memory_db() or not name or name.startswith("file:"):
            return None
        return f"sqlite:///{Path(name).resolve()}"
    if connection.vendor == "postgresql":
        auth = quote(db.get("USER") or "", safe="")
        if db.get("PASSWORD"):
            auth += ":" + quote(db["PASSWORD"], safe="")
        host = db.get("HOST") or "127.0.0.1"
        port = db.get("PORT") or 5432
        return f"postgres://{auth}@{host}:{port}/{quote(name, safe='')}"
    return None


# The data folders of the workers (and live consoles) this test process started: each test's
# key ring (tests/conftest.py) pins its root in all of them, whichever fixture started them.
_DATA_PATHS: set[Path] = set()


def pin_root(data_path: Path | None = None) -> None:
    """Pin this test's signing root (the key ring fixture's) in the DATA_PATH of a worker
    or live console, which verify versions against it; without `data_path`, in all of them."""
    from tools_app.signing import keyring

    source = keyring.pin_path()
    if data_path is not None:
        _DATA_PATHS.add(data_path)
    if not source.exists():
        return
    for folder in [data_path] if data_path is not None else sorted(_DATA_PATHS):
        target = folder / "signing" / source.name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(source.read_bytes())


@dataclass
class CeleryWorker:
    """One worker subprocess; `kill()` and `start()` let a test crash and replace it."""

    root: Path
    broker_url: str
    queue: str
    database_url: str
    encryption_key: str
    concurrency: int = 2
    extra_env: dict[str, str] = field(default_factory=dict)
    # A command the worker runs under (tests/support/egress.py: with_file_at).
    prefix: list[str] = field(default_factory=list)
    proc: subprocess.Popen | None = None
    starts: int = 0

    @property
    def state_dir(self) -> Path:
        return self.root / "state"

    @property
    def log_path(self) -> Path:
        return self.root / f"worker-{self.starts}.log"

    def env(self) -> dict[str, str]:
        env = {
            key: value
            for key, value in os.environ.items()
            # PROMETHEUS_MULTIPROC_DIR: each live web server counts in its own state dir.
            if not key.startswith(
                ("CONSOLE_", "CELERY_", "DATABASE_URL", "DJANGO_", "PROMETHEUS_MULTIPROC_DIR")
            )
        }
        env.update(
            {
                "DJANGO_SETTINGS_MODULE": "console.settings",
                "DATABASE_URL": self.database_url,
                "CELERY_BROKER_URL": self.broker_url,
                "CELERY_TASK_DEFAULT_QUEUE": self.queue,
                "CONSOLE_STATE_DIR": str(self.state_dir),
                "DATA_PATH": str(self.root / "data"),
                "CONSOLE_ENCRYPTION_KEYS": self.encryption_key,
                "CONSOLE_SECRET_KEY": "worker-tests-only-" + uuid.uuid4().hex,
                "PYTHONDONTWRITEBYTECODE": "1",
                # As in production: later runs of a shape start in a spare sandbox, and
                # log lines are JSON (tests/ops/test_observability_worker.py reads them).
                "TOOL_CONSOLE_SPARE_SANDBOXES": "on",
                "CONSOLE_LOG_FORMAT": "json",
                **self.extra_env,
            }
        )
        return env

    def start(self) -> None:
        self.starts += 1
        self.state_dir.mkdir(parents=True, exist_ok=True)
        pin_root(self.root / "data")
        log = open(self.log_path, "wb")  # noqa: SIM115 (kept open by the child)
        self.proc = subprocess.Popen(
            [
                *self.prefix,
                str(CELERY),
                "-A",
                "console",
                "worker",
                "--loglevel",
                "INFO",
                "--pool",
                "prefork",
                "--concurrency",
                str(self.concurrency),
                "--queues",
                self.queue,
                "--hostname",
                f"{self.queue}-{self.starts}@%h",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
            ],
            cwd=REPO,
            env=self.env(),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: kill() takes the pool too
        )
        log.close()
        self._wait_ready()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                raise RuntimeError(f"the Celery worker exited:\n{self.log()}")
            if b" ready." in self.log_path.read_bytes():
                return
            time.sleep(0.1)
        raise RuntimeError(f"the Celery worker did not become ready:\n{self.log()}")

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-8000:]
        except OSError:
            return ""

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def pool_pids(self) -> list[int]:
        """The prefork children (they run the tasks)."""
        if not self.alive:
            return []
        out = subprocess.run(
            ["ps", "-o", "pid=", "--ppid", str(self.proc.pid)],
            capture_output=True,
            text=True,
            check=False,
        ).stdout
        return [int(pid) for pid in out.split()]

    def kill(self) -> None:
        """SIGKILL the whole worker: main process and pool, no chance to clean up."""
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        if not self.alive:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.kill()


def _configure_publisher(worker: CeleryWorker) -> Callable[[], None]:
    """Point this process's Celery app at the worker's broker and queue; returns undo."""
    from console.celery import app

    keys = ("broker_url", "broker_transport", "broker_transport_options", "task_default_queue")
    saved = {key: app.conf[key] for key in keys}
    options = {}
    transport = None
    if worker.broker_url == "filesystem://":
        transport = "tools_app.ops.broker:Transport"  # as settings.py picks it
        folder = worker.state_dir / "broker" / "queue"
        folder.mkdir(parents=True, exist_ok=True)
        (worker.state_dir / "broker" / "processed").mkdir(parents=True, exist_ok=True)
        options = {
            "data_folder_in": str(folder),
            "data_folder_out": str(folder),
            "processed_folder": str(worker.state_dir / "broker" / "processed"),
            "control_folder": str(worker.state_dir / "broker" / "control"),
            "quarantine_folder": str(worker.state_dir / "broker" / "quarantine"),
            "store_processed": False,
        }

    def apply(values: dict) -> None:
        app.conf.update(values)
        # Forget connections and queue declarations made from the old settings.
        app._pool = None
        app.__dict__.pop("amqp", None)

    apply(
        {
            "broker_url": worker.broker_url,
            "broker_transport": transport,
            "broker_transport_options": options,
            "task_default_queue": worker.queue,
        }
    )
    return lambda: apply(saved)


@pytest.fixture(scope="session")
def celery_worker_process(
    django_db_setup, django_db_blocker, tmp_path_factory
) -> Iterator[CeleryWorker]:
    if not CELERY.exists():
        pytest.fail(f"celery is not installed next to {sys.executable}")
    with django_db_blocker.unblock():
        database_url = worker_database_url()
    if database_url is None:
        skip_or_fail(
            "the test database is in-memory SQLite, which a worker process cannot open: "
            "set CONSOLE_TEST_DB_NAME=/tmp/some-file.sqlite3 (dev.py test does) or use "
            "DATABASE_URL=postgres://..."
        )
    if redis_reachable():
        broker = REDIS_URL
    elif in_ci():
        pytest.fail(f"Redis is required in CI but does not answer at {REDIS_URL}")
    else:
        broker = "filesystem://"
    worker = CeleryWorker(
        root=tmp_path_factory.mktemp("celery-worker"),
        broker_url=broker,
        queue=f"test-{uuid.uuid4().hex[:12]}",
        database_url=database_url,
        encryption_key=Fernet.generate_key().decode(),
    )
    undo = _configure_publisher(worker)
    worker.start()
    try:
        yield worker
    finally:
        worker.stop()
        undo()


@pytest.fixture
def worker(celery_worker_process: CeleryWorker, transactional_db, settings) -> CeleryWorker:
    """The running worker, restarted if an earlier test killed it. This process shares
    its encryption key (sealed params, integration secrets) and artifacts folder."""
    if not celery_worker_process.alive:
        celery_worker_process.start()
    settings.CONSOLE_ENCRYPTION_KEYS = [celery_worker_process.encryption_key]
    settings.ARTIFACTS_PATH = celery_worker_process.state_dir / "artifacts"
    return celery_worker_process


# What each live console (console_url) writes to its standard output and error, by URL.
LIVE_LOGS: dict[str, Path] = {}


@pytest.fixture(scope="session")
def console_url(celery_worker_process: CeleryWorker, tmp_path_factory) -> Iterator[str]:
    """The console served as in production (gunicorn with uvicorn workers serving
    console.asgi, tests/support/live_settings.py), sharing the worker's database, broker, queue
    and keys. One per session: MCP and the http tools' index.js (test_http_shim.py)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    root = tmp_path_factory.mktemp("live-web")
    env = {
        **celery_worker_process.env(),
        "CONSOLE_SYNC_ON_START": "0",
        "CONSOLE_ALLOWED_HOSTS": "127.0.0.1,localhost",
        "DJANGO_SETTINGS_MODULE": "tests.support.live_settings",
        # Plain HTTP on loopback, as behind a TLS-terminating proxy: the API answers here
        # instead of redirecting to an https:// that nothing serves.
        "CONSOLE_SSL_REDIRECT": "0",
        # Two web workers, as by default: no call may depend on reaching the same one.
        "WEB_CONCURRENCY": "2",
    }
    log = open(root / "web.log", "wb")  # noqa: SIM115 (kept open by the child)
    proc = subprocess.Popen(
        [str(GUNICORN), "console.asgi:application", "-c", "console/gunicorn.conf.py"]
        + ["--bind", f"127.0.0.1:{port}"],
        cwd=REPO,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    log.close()
    url = f"http://127.0.0.1:{port}"
    LIVE_LOGS[url] = root / "web.log"
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"{url}/api/healthz", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError((root / "web.log").read_text(errors="replace")[-4000:])
        time.sleep(0.2)
    try:
        yield url
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(timeout=30)


def wait_for_run(run_id, statuses: tuple[str, ...], timeout: float = 60.0, worker=None):
    """Poll the database until the run reaches one of `statuses`; returns the run."""
    from tools_app.models import Run

    deadline = time.monotonic() + timeout
    run = None
    while time.monotonic() < deadline:
        run = Run.objects.get(pk=run_id)
        if run.status in statuses:
            return run
        time.sleep(0.05)
    log = worker.log() if worker is not None else ""
    state = run.status if run is not None else "?"
    raise AssertionError(f"run {run_id} is {state}, not in {statuses}, after {timeout} s\n{log}")


class IdleBroker:
    """This process publishes to an embedded broker in a temporary folder nobody consumes."""

    def __init__(self, root) -> None:
        self.queue = f"queued-{uuid.uuid4().hex[:8]}"
        self.folder = root / "queue"
        for name in ("queue", "processed", "control", "quarantine"):
            (root / name).mkdir(parents=True)
        self.options = {
            "data_folder_in": str(self.folder),
            "data_folder_out": str(self.folder),
            "processed_folder": str(root / "processed"),
            "control_folder": str(root / "control"),
            "quarantine_folder": str(root / "quarantine"),
        }

    def messages(self) -> int:
        return sum(1 for name in os.listdir(self.folder) if name.endswith(f".{self.queue}.msg"))


@pytest.fixture
def idle_broker(tmp_path):
    broker = IdleBroker(tmp_path / "broker")
    from console.celery import app

    keys = ("broker_url", "broker_transport", "broker_transport_options", "task_default_queue")
    saved = {key: app.conf[key] for key in keys}

    def apply(values: dict) -> None:
        app.conf.update(values)
        app._pool = None
        app.__dict__.pop("amqp", None)

    apply(
        {
            "broker_url": "filesystem://",
            "broker_transport": "tools_app.ops.broker:Transport",
            "broker_transport_options": broker.options,
            "task_default_queue": broker.queue,
        }
    )
    yield broker
    apply(saved)
