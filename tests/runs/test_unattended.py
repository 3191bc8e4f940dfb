"""What runs with nobody watching: celery beat's reaper entry, sent the way beat sends it
to a real worker, and gunicorn's start-up hook that syncs the seed tools."""

from __future__ import annotations

import runpy
import time
from datetime import timedelta

import pytest
from celery.beat import Scheduler
from django.conf import settings
from django.utils import timezone

from console.celery import app
from tests.support import REPO, tool_files
from tools_app.audit import Actor
from tools_app.models import AuditEvent, Run, Tool
from tools_app.models.runs import RunStatus, RunVia
from tools_app.runs import start


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_beats_reaper_entry_marks_a_dead_workers_run_lost(worker, make_tool):
    tool = make_tool("quick", language="python")
    run = start.start_run(
        tool.published_version, {}, actor=Actor.system(), via=RunVia.COMMAND, enqueue=False
    )
    # What a worker killed an hour ago leaves behind: running, its heartbeat long gone.
    an_hour_ago = timezone.now() - timedelta(hours=1)
    Run.objects.filter(pk=run.pk).update(
        status=RunStatus.RUNNING, started_at=an_hour_ago, heartbeat_at=an_hour_ago,
        worker="gone@host",
    )  # fmt: skip

    # Beat's own scheduler, loaded from the app's beat_schedule, sends the entry by name.
    scheduler = Scheduler(app)
    entry = scheduler.schedule["reap-lost-runs"]
    assert entry.task == "tools_app.tasks.reap_lost_runs"
    assert entry.schedule.run_every == timedelta(seconds=15)
    scheduler.apply_async(entry, advance=False)

    # Nobody reads the run through the pages or the API (they would reap it themselves):
    # only the worker's task can change it.
    deadline = time.monotonic() + 60
    status = RunStatus.RUNNING
    while status == RunStatus.RUNNING and time.monotonic() < deadline:
        time.sleep(0.1)
        status = Run.objects.values_list("status", flat=True).get(pk=run.pk)
    assert status == RunStatus.LOST, worker.log()
    assert AuditEvent.objects.filter(action="run.lost").exists()


def gunicorn_config() -> dict:
    return runpy.run_path(str(REPO / "console" / "gunicorn.conf.py"))


@pytest.fixture(autouse=True)
def own_metrics_dir(monkeypatch, tmp_path):
    """on_starting sets PROMETHEUS_MULTIPROC_DIR in this process (as in gunicorn's master):
    a folder of this test's, unset after it, or later tests' processes would inherit it."""
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path / "metrics"))


class Server:
    """The part of gunicorn's Arbiter the hook uses: its error log."""

    def __init__(self) -> None:
        self.errors: list[str] = []
        self.log = self

    def error(self, message: str, *args) -> None:
        self.errors.append(message % args)


@pytest.mark.django_db
def test_gunicorns_start_hook_syncs_the_seed_tools(monkeypatch, tmp_path):
    monkeypatch.setenv("CONSOLE_SYNC_ON_START", "1")
    server = Server()

    gunicorn_config()["on_starting"](server)

    seeds = {path.name for path in (REPO / "seed" / "tools").iterdir() if path.is_dir()}
    assert set(Tool.objects.values_list("name", flat=True)) == seeds
    mirrored = {p.name for p in (settings.DATA_PATH / "tools").iterdir() if p.is_dir()}
    assert mirrored == seeds
    assert server.errors == []


@pytest.mark.django_db
def test_gunicorns_start_hook_starts_the_console_despite_an_invalid_seed(
    monkeypatch, tmp_path, settings
):
    seed = tmp_path / "seed"
    for name, text in {"good": None, "bad": "no frontmatter"}.items():
        (seed / "tools" / name).mkdir(parents=True)
        for path, data in tool_files(name).items():
            (seed / "tools" / name / path).write_bytes(data if text is None else text.encode())
    settings.SEED_PATH = seed
    monkeypatch.setenv("CONSOLE_SYNC_ON_START", "1")

    gunicorn_config()["on_starting"](Server())  # returns: the server goes on starting

    assert list(Tool.objects.values_list("name", flat=True)) == ["good"]


@pytest.mark.django_db
def test_gunicorns_start_hook_can_be_turned_off(monkeypatch):
    monkeypatch.setenv("CONSOLE_SYNC_ON_START", "0")

    gunicorn_config()["on_starting"](Server())

    assert not Tool.objects.exists()
