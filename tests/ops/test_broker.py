"""The embedded broker (tools_app/ops/broker.py): a message file is visible only when complete,
and a torn or corrupt one is quarantined while the worker goes on (celery/kombu#1551 killed
the worker with "Unrecoverable error: JSONDecodeError")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from cryptography.fernet import Fernet
from kombu import Connection

from tests.support import require
from tests.support.worker import (
    CeleryWorker,
    _configure_publisher,
    wait_for_run,
    worker_database_url,
)
from tools_app.audit import Actor
from tools_app.models.runs import FINISHED, RunStatus, RunVia
from tools_app.ops import broker
from tools_app.runs import start

REPO = Path(__file__).resolve().parents[2]
QUICK_PY = """
def execute(tool_call_id, params, signal, on_update):
    return {"content": [{"type": "text", "text": "served"}]}
"""


def folders(root: Path) -> dict[str, str]:
    names = ("queue", "processed", "control", "quarantine")
    paths = {name: root / name for name in names}
    for path in paths.values():
        path.mkdir(parents=True, exist_ok=True)
    return {
        "data_folder_in": str(paths["queue"]),
        "data_folder_out": str(paths["queue"]),
        "processed_folder": str(paths["processed"]),
        "control_folder": str(paths["control"]),
        "quarantine_folder": str(paths["quarantine"]),
        "store_processed": False,
    }


def pending(options: dict) -> list[str]:
    return [n for n in os.listdir(options["data_folder_in"]) if not n.startswith(".")]


def connection(options: dict) -> Connection:
    return Connection("filesystem://", transport=broker.Transport, transport_options=options)


def test_the_default_install_uses_the_safe_transport(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CELERY_", "DATABASE_URL"))}
    env.update(CONSOLE_STATE_DIR=str(tmp_path / "state"), DATA_PATH=str(tmp_path / "data"))
    code = (
        "import django; django.setup()\n"
        "from django.conf import settings\n"
        "from console.celery import app\n"
        "conn = app.connection_for_write()\n"
        "print(settings.CELERY_BROKER_URL, type(conn.transport).__module__)\n"
    )
    env["DJANGO_SETTINGS_MODULE"] = "console.settings"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == ["filesystem://", "tools_app.ops.broker"]


def test_a_concurrent_reader_never_sees_a_partial_message(tmp_path):
    """A producer writes large messages while one reader peeks at every matching file the
    way kombu's own consumer finds them, and another consumes them: every file a reader
    sees parses, nothing is quarantined, nothing is lost."""
    options = folders(tmp_path)
    queue = f"q{uuid.uuid4().hex[:8]}"  # bindings are remembered per process, per name
    count = 200
    body = "x" * (256 << 10)  # a long write: plenty of time to catch a half-written file
    produced = threading.Event()
    torn: list[str] = []
    received: list[int] = []

    def peek() -> None:
        folder = options["data_folder_in"]
        while not produced.is_set():
            for name in os.listdir(folder):
                if name.partition(".")[2] != f"{queue}.msg":
                    continue
                try:
                    raw = Path(folder, name).read_bytes()
                except FileNotFoundError:
                    continue  # consumed meanwhile
                try:
                    json.loads(raw)
                except ValueError:
                    torn.append(f"{name}: {len(raw)} bytes")

    def consume() -> None:
        with connection(options) as conn:
            simple = conn.SimpleQueue(queue)
            while len(received) < count:
                try:
                    message = simple.get(block=True, timeout=0.5)
                except simple.Empty:
                    if produced.is_set() and not pending(options):
                        return
                    continue
                received.append(message.payload["n"])
                message.ack()

    readers = [threading.Thread(target=peek), threading.Thread(target=consume)]
    for reader in readers:
        reader.start()
    try:
        with connection(options) as conn:
            simple = conn.SimpleQueue(queue)
            for n in range(count):
                simple.put({"n": n, "body": body})
    finally:
        produced.set()
        for reader in readers:
            reader.join(60)

    assert torn == []
    assert sorted(received) == list(range(count))
    assert broker.quarantined(options["quarantine_folder"]) == []
    # No temporary file stays behind either.
    assert pending(options) == []
    assert os.listdir(Path(options["data_folder_in"], broker.CLAIMED)) == []


def test_it_quarantines_an_empty_and_a_corrupt_file_and_delivers_the_next(tmp_path, caplog):
    options = folders(tmp_path)
    folder = Path(options["data_folder_in"])
    queue = f"q{uuid.uuid4().hex[:8]}"
    with connection(options) as conn:
        simple = conn.SimpleQueue(queue)
        # Named to sort before the good one, as older files do.
        (folder / f"0_{uuid.uuid4()}.{queue}.msg").write_bytes(b"")
        (folder / f"01_{uuid.uuid4()}.{queue}.msg").write_bytes(b'{"body": "trunc')
        (folder / f"02_{uuid.uuid4()}.{queue}.msg").write_bytes(b'{"no": "properties"}')
        simple.put({"after": "the bad ones"})

        message = simple.get(block=True, timeout=5)

    assert message.payload == {"after": "the bad ones"}
    quarantined = broker.quarantined(options["quarantine_folder"])
    assert [p.name.partition("_")[0] for p in quarantined] == ["01", "02", "0"]
    log = caplog.text
    assert "empty file" in log and "not valid JSON" in log and "not a kombu message" in log


# --------------------------------------------------------------------------------------
# A real worker on the embedded broker


@pytest.fixture(scope="module")
def filesystem_worker(django_db_setup, django_db_blocker, tmp_path_factory):
    """A worker on the filesystem broker whatever else answers (the shared worker fixture
    prefers Redis)."""
    with django_db_blocker.unblock():
        database_url = worker_database_url()
    require(database_url is None, "the worker needs a file SQLite or PostgreSQL test database")
    worker = CeleryWorker(
        root=tmp_path_factory.mktemp("fs-worker"),
        broker_url="filesystem://",
        queue=f"fs-{uuid.uuid4().hex[:12]}",
        database_url=database_url,
        encryption_key=Fernet.generate_key().decode(),
        concurrency=1,
    )
    undo = _configure_publisher(worker)
    worker.start()
    try:
        yield worker
    finally:
        worker.stop()
        undo()


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_running_worker_survives_torn_and_corrupt_messages(
    filesystem_worker, make_tool, settings
):
    worker = filesystem_worker
    settings.CONSOLE_ENCRYPTION_KEYS = [worker.encryption_key]
    quick = make_tool("quick", language="python", source=QUICK_PY)
    queue_dir = worker.state_dir / "broker" / "queue"
    quarantine = worker.state_dir / "broker" / "quarantine"
    # What a torn write leaves (kombu's create-then-write), and a corrupt file.
    (queue_dir / f"0_{uuid.uuid4()}.{worker.queue}.msg").write_bytes(b"")
    (queue_dir / f"1_{uuid.uuid4()}.{worker.queue}.msg").write_bytes(b'{"body": "eyJ0')

    deadline = time.monotonic() + 30
    while len(broker.quarantined(quarantine)) < 2:
        assert worker.alive, worker.log()
        assert time.monotonic() < deadline, f"nothing quarantined\n{worker.log()}"
        time.sleep(0.05)

    for _ in range(2):  # the next runs are served
        run = start.start_run(quick.published_version, {}, actor=Actor.system(), via=RunVia.COMMAND)
        run = wait_for_run(run.pk, FINISHED, worker=worker)
        assert run.status == RunStatus.SUCCEEDED, run.result
    assert worker.alive
    log = worker.log()
    assert "quarantined message file" in log and "Unrecoverable error" not in log
