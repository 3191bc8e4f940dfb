"""The SQL a worker spends on one run (tools_app.runs.execute.execute_run, as the Celery task
calls it): read the run, claim it, read keys.json (the signature check), store the
outcome. Every statement is paid on every run, by the database and by the worker."""

from __future__ import annotations

import pytest

from tools_app import tasks
from tools_app.audit import Actor
from tools_app.models import Run
from tools_app.models.runs import RunStatus, RunVia
from tools_app.runs import execute as run_execute
from tools_app.runs import start

pytestmark = pytest.mark.django_db

ECHO_PY = """
def execute(tool_call_id, params, signal, on_update):
    return {"content": [{"type": "text", "text": "hello " + params["name"]}]}
"""
INPUTS = {"name": {"type": "string", "description": "Who to greet."}}


@pytest.fixture
def echo(make_tool):
    return make_tool("echo", language="python", source=ECHO_PY, inputs=INPUTS)


def queued(tool) -> Run:
    version = tool.versions.get()
    return start.start_run(
        version, {"name": "Ada"}, actor=Actor.system(), via=RunVia.COMMAND, enqueue=False
    )


def test_it_runs_a_task_in_four_statements(echo, django_assert_max_num_queries, monkeypatch):
    run = queued(echo)
    # The cancel watch reads the run every CANCEL_POLL_SECONDS while the tool runs: on a
    # loaded machine a slow run makes one more read. Those are the watch's, not the task's.
    monkeypatch.setattr(run_execute, "CANCEL_POLL_SECONDS", 3600)
    # SELECT the run, UPDATE to claim it, SELECT the newest keys.json (the signature
    # check: a retired key stops verifying at once), UPDATE with the outcome: no
    # transaction around an outcome without artifacts, and the task does not read the
    # row back.
    with django_assert_max_num_queries(4):
        tasks.execute_run(str(run.pk))
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED
    assert run.result["content"][0]["text"] == "hello Ada"


def test_it_returns_the_finished_run_when_asked_to_reload(echo):
    run = queued(echo)
    finished = run_execute.execute_run(run.pk)
    assert finished is not None and finished.status == RunStatus.SUCCEEDED
    assert run_execute.execute_run(queued(echo).pk, reload=False) is None
