"""The state directory is the console's alone: STATE_DIR and the folders the console keeps
in it are 0700; the SQLite database (and its -wal/-shm files), the secret key file and the
development encryption key are 0600. Whoever creates them: importing settings, migrate,
the first database connection, or `dev.py up`, even under a umask of 0 (the attack: a
process whose umask lets everything be world-readable)."""

from __future__ import annotations

import os
import signal
import socket
import stat
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from django.db.utils import ConnectionHandler

from tests import support
from tests.support import REPO

PRIVATE_DIRS = ["", "static", "broker", "broker/queue", "broker/processed", "broker/control",
                "artifacts", "runs"]  # fmt: skip
PRIVATE_FILES = ["secret_key", "encryption.key", "console.sqlite3"]


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


# The subprocess tests make their own SQLite console whatever this run's database, so they
# run (and pass) in the PostgreSQL pass of `dev.py test` too: nothing skips in CI.


def console_env(tmp_path: Path) -> dict[str, str]:
    """A console with every default: SQLite, the embedded broker and generated keys, all
    in a fresh state directory."""
    return support.console_env(tmp_path, fresh=True)


def no_umask() -> None:
    os.umask(0)


def manage(env: dict, *args: str) -> None:
    support.manage(*args, env=env, check=True, preexec_fn=no_umask)


def assert_private(state: Path, files=PRIVATE_FILES) -> None:
    for rel in PRIVATE_DIRS:
        assert mode(state / rel) == 0o700, f"{rel or 'STATE_DIR'} is {oct(mode(state / rel))}"
    for rel in files:
        assert mode(state / rel) == 0o600, f"{rel} is {oct(mode(state / rel))}"
    for extra in ("console.sqlite3-wal", "console.sqlite3-shm"):
        if (state / extra).exists():
            assert mode(state / extra) == 0o600, extra
    # Every folder directly in it, whoever made it, is private too. (Other files, like
    # the beat schedule, are the state directory's 0700 to protect.)
    for entry in state.iterdir():
        if entry.is_dir() and entry.name != "data":
            assert mode(entry) == 0o700, f"{entry.name} is {oct(mode(entry))}"


def test_migrate_makes_a_private_state_directory(tmp_path):
    env = console_env(tmp_path)

    manage(env, "migrate", "--noinput", "-v", "0")

    assert_private(tmp_path / "state")
    assert (tmp_path / "state" / "console.sqlite3").stat().st_size > 0


def test_it_tightens_a_state_directory_left_open(tmp_path):
    from cryptography.fernet import Fernet

    keys = {"secret_key": "k" * 50, "encryption.key": Fernet.generate_key().decode()}
    state = tmp_path / "state"
    for rel in PRIVATE_DIRS:
        (state / rel).mkdir(parents=True, exist_ok=True)
        (state / rel).chmod(0o777)  # noqa: S103 (the loose install under test)
    for rel in PRIVATE_FILES:
        (state / rel).write_text("" if rel.endswith("sqlite3") else keys[rel])
        (state / rel).chmod(0o666)  # noqa: S103

    manage(console_env(tmp_path), "migrate", "--noinput", "-v", "0")

    assert_private(state)


def test_the_database_a_connection_opens_is_private(tmp_path, django_db_blocker):
    # A SQLite connection of its own, so the PostgreSQL pass checks the same receiver.
    name = tmp_path / "loose.sqlite3"
    name.touch(mode=0o666)
    name.chmod(0o666)  # noqa: S103 (the loose file under test)
    handler = ConnectionHandler(
        {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": str(name)}}
    )
    sqlite = handler["default"]
    with django_db_blocker.unblock():
        try:
            sqlite.ensure_connection()
        finally:
            sqlite.close()

    assert mode(name) == 0o600
    for extra in (f"{name}-wal", f"{name}-shm"):
        if Path(extra).exists():
            assert mode(Path(extra)) == 0o600, extra


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_dev_py_up_makes_a_private_state_directory(tmp_path):
    env = console_env(tmp_path)
    env["CONSOLE_SYNC_ON_START"] = "0"
    port = free_port()
    up = subprocess.Popen(
        [sys.executable, str(REPO / "dev.py"), "up", "--port", str(port), "--workers", "1"],
        env=env,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        preexec_fn=no_umask,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 240
        while True:
            assert up.poll() is None, up.stdout.read().decode()[-3000:]
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/healthz", timeout=2):
                    break
            except OSError:
                assert time.monotonic() < deadline, "dev.py up did not answer in time"
                time.sleep(0.5)
        state = tmp_path / "state"
        # The worker's beat schedule lands in the state directory too, not in ./var.
        deadline = time.monotonic() + 60
        while not list(state.glob("celerybeat-schedule*")):
            assert time.monotonic() < deadline, sorted(p.name for p in state.iterdir())
            time.sleep(0.5)
        assert_private(state)
    finally:
        up.send_signal(signal.SIGTERM)
        try:
            up.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(up.pid, signal.SIGKILL)
            up.wait()
