"""No run stays queued forever: the reaper (beat's `reap-lost-runs`) re-sends a run no
worker claimed within CONSOLE_RUN_QUEUED_TIMEOUT_SECONDS, then marks it lost with what to
check; cancel works on a queued run without any worker, and a worker that gets its message
later does not run it. The clock is the test's: no sleeping through timeouts."""

from __future__ import annotations

import base64
import json
import time
from datetime import timedelta

import django.utils.timezone
import pytest
from django.conf import settings
from django.test import Client

from console.celery import app
from tests.support.forms import submit
from tests.support.worker import wait_for_run
from tools_app import tasks
from tools_app.audit import Actor
from tools_app.models import AuditEvent, Run
from tools_app.models.runs import FINISHED, RunStatus, RunVia
from tools_app.runs import execute as run_execute
from tools_app.runs import start as run_start

QUICK_PY = """
def execute(tool_call_id, params, signal, on_update):
    return {"content": [{"type": "text", "text": "ran"}]}
"""
TIMEOUT = 600


class Clock:
    def __init__(self) -> None:
        self.now = django.utils.timezone.now()

    def __call__(self):
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@pytest.fixture
def clock(monkeypatch) -> Clock:
    """django.utils.timezone.now under the test's control (auto_now_add follows it too)."""
    fake = Clock()
    monkeypatch.setattr(django.utils.timezone, "now", fake)
    return fake


def reap() -> None:
    """The reaper task, found by the name beat's schedule sends. Its body runs here (a
    worker's task signals would close the test's database connection)."""
    name = settings.CELERY_BEAT_SCHEDULE["reap-lost-runs"]["task"]
    app.tasks[name].run()


@pytest.fixture
def quick(make_tool):
    return make_tool("quick", language="python", source=QUICK_PY)


def start(tool, *, enqueue: bool, capture) -> Run:
    with capture(execute=True):
        return run_start.start_run(
            tool.published_version, {}, actor=Actor.system(), via=RunVia.COMMAND, enqueue=enqueue
        )


@pytest.mark.django_db
def test_it_resends_an_unclaimed_run_once_then_marks_it_lost(
    clock, idle_broker, quick, settings, django_capture_on_commit_callbacks
):
    settings.RUN_QUEUED_TIMEOUT_SECONDS = TIMEOUT
    run = start(quick, enqueue=True, capture=django_capture_on_commit_callbacks)
    assert idle_broker.messages() == 1

    clock.advance(TIMEOUT - 1)
    reap()
    run.refresh_from_db()
    assert run.status == RunStatus.QUEUED and run.resent_at is None
    assert idle_broker.messages() == 1

    clock.advance(2)
    reap()
    run.refresh_from_db()
    assert run.status == RunStatus.QUEUED and run.resent_at == clock.now
    assert idle_broker.messages() == 2  # sent again
    assert AuditEvent.objects.filter(action="run.resend", target_id=str(run.pk)).exists()

    clock.advance(TIMEOUT - 1)
    reap()
    run.refresh_from_db()
    assert run.status == RunStatus.QUEUED
    assert idle_broker.messages() == 2  # only once

    clock.advance(2)
    reap()
    run.refresh_from_db()
    assert run.status == RunStatus.LOST and run.finished_at == clock.now
    assert "No worker picked this run up within 10 minutes" in run.error
    assert "is a worker running?" in run.error and "/system/" in run.error
    assert run.result["isError"] is True and run.sealed_params == ""
    assert idle_broker.messages() == 2
    assert AuditEvent.objects.filter(action="run.lost", target_id=str(run.pk)).exists()
    # Either message reaching a worker now runs nothing.
    assert run_execute.execute_run(run.pk) is None
    assert Run.objects.get(pk=run.pk).status == RunStatus.LOST


@pytest.mark.django_db
def test_it_queues_the_task_the_worker_registered(
    idle_broker, quick, django_capture_on_commit_callbacks
):
    """runs sends the task by name (tasks imports runs, never the reverse): the message
    must name the task tools_app/tasks.py registers, with the run's id."""
    run = start(quick, enqueue=True, capture=django_capture_on_commit_callbacks)
    [message] = [
        json.loads(path.read_text())
        for path in idle_broker.folder.iterdir()
        if path.name.endswith(f".{idle_broker.queue}.msg")
    ]
    name = message["headers"]["task"]
    assert app.tasks[name] == tasks.execute_run  # shared_task gives a proxy of it
    args, kwargs, _ = json.loads(base64.b64decode(message["body"]))
    assert args == [str(run.pk)] and kwargs == {}
    assert message["headers"]["ignore_result"] is True


@pytest.mark.django_db
def test_the_run_page_turns_an_overdue_queued_run_lost_without_any_reaper(
    clock, idle_broker, quick, settings, developer, django_capture_on_commit_callbacks
):
    """With no worker there is no beat either: looking at the run does the reaper's job."""
    settings.RUN_QUEUED_TIMEOUT_SECONDS = TIMEOUT
    run = start(quick, enqueue=True, capture=django_capture_on_commit_callbacks)
    client = Client()
    client.force_login(developer)

    clock.advance(TIMEOUT + 1)
    client.get(f"/runs/{run.pk}/")
    assert Run.objects.get(pk=run.pk).resent_at is not None
    clock.advance(TIMEOUT + 1)
    page = client.get(f"/runs/{run.pk}/").content.decode()

    assert Run.objects.get(pk=run.pk).status == RunStatus.LOST
    assert "No worker picked this run up" in page


@pytest.mark.django_db
def test_cancel_of_a_queued_run_needs_no_worker(idle_broker, quick, developer):
    client = Client()
    client.force_login(developer)
    response = submit(client, f"/tools/{quick.name}/run/", {"params": "{}"},
                      form_id="raw-json-form")  # fmt: skip
    run = Run.objects.get()
    assert response.status_code == 302 and run.status == RunStatus.QUEUED

    response = submit(client, f"/runs/{run.pk}/", button="Cancel")

    assert response.status_code == 302
    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED and run.finished_at is not None
    assert "Cancelled by" in run.result["content"][0]["text"]


# --------------------------------------------------------------------------------------
# With a real worker


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_run_whose_message_was_lost_is_served_after_the_resend(clock, worker, quick, settings):
    settings.RUN_QUEUED_TIMEOUT_SECONDS = TIMEOUT
    # Stored but never sent: what a lost or quarantined message leaves.
    run = run_start.start_run(
        quick.published_version, {}, actor=Actor.system(), via=RunVia.COMMAND, enqueue=False
    )
    clock.advance(TIMEOUT + 1)

    reap()

    run = wait_for_run(run.pk, FINISHED, worker=worker)
    assert run.status == RunStatus.SUCCEEDED, run.result
    assert run.resent_at is not None


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_worker_that_gets_a_cancelled_runs_message_later_does_not_run_it(
    worker, quick, developer
):
    worker.stop()  # no worker: the message waits on the broker
    # Started by the developer who cancels it: only a run's starter (or an admin) may.
    run = run_start.start_run(
        quick.published_version, {}, actor=Actor(user=developer), via=RunVia.BROWSER
    )
    client = Client()
    client.force_login(developer)
    assert submit(client, f"/runs/{run.pk}/", button="Cancel").status_code == 302
    assert Run.objects.get(pk=run.pk).status == RunStatus.CANCELLED

    worker.start()
    deadline = time.monotonic() + 60
    while "is not queued any more; skipped" not in worker.log():
        assert time.monotonic() < deadline, worker.log()
        time.sleep(0.1)

    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED
    assert run.started_at is None and run.worker == ""
