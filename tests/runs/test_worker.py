"""Runs on a real Celery worker process: end to end, concurrency, cancel, a killed worker,
and hostile tools that must not take the worker down."""

from __future__ import annotations

import time

import pytest
from django.test import Client

from tests.support import require
from tests.support.worker import wait_for_run
from tools_app.audit import Actor
from tools_app.models import Run
from tools_app.models.runs import FINISHED, RunStatus, RunVia
from tools_app.models.tokens import AgentToken, Scope
from tools_app.runner import isolation_level
from tools_app.runs import cancel
from tools_app.runs import start as run_start

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

PROGRESS_TS = """
export async function execute(toolCallId: string, params: any, signal: AbortSignal,
                              onUpdate: (u: any) => void) {
  for (let i = 1; i <= 3; i++) {
    onUpdate({ content: [{ type: "text", text: `step ${i}` }] });
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return { content: [{ type: "text", text: `hello ${params.name}` }] };
}
"""

SLEEPY_PY = """
import time

def execute(tool_call_id, params, signal, on_update):
    for i in range(int(params["seconds"] * 10)):
        if signal.aborted:
            return {"content": [{"type": "text", "text": "stopped"}], "isError": True}
        if i % 10 == 0:
            on_update({"content": [{"type": "text", "text": f"tick {i // 10}"}]})
        time.sleep(0.1)
    return {"content": [{"type": "text", "text": "slept"}]}
"""

QUICK_PY = """
def execute(tool_call_id, params, signal, on_update):
    return {"content": [{"type": "text", "text": "quick"}]}
"""

SECONDS = {"seconds": {"type": "number", "description": "How long to sleep."}}


def start(tool, params=None, **kw) -> Run:
    return run_start.start_run(
        tool.published_version, params or {}, actor=Actor.system(), via=RunVia.COMMAND, **kw
    )


def test_it_runs_a_typescript_tool_end_to_end(worker, make_tool):
    tool = make_tool(
        "greet",
        source=PROGRESS_TS,
        inputs={
            "name": {"type": "string", "description": "Who."},
            "key": {"type": "string", "description": "A key.", "sensitive": True},
        },
    )
    run = start(tool, {"name": "Ada", "key": "k-123456"})
    assert run.sealed_params and run.params["key"] == run_start.MASK

    run = wait_for_run(run.pk, FINISHED, worker=worker)

    assert run.status == RunStatus.SUCCEEDED, run.result
    assert run.result == {"content": [{"type": "text", "text": "hello Ada"}], "isError": False}
    assert [u.content[0]["text"] for u in run.updates.all()] == ["step 1", "step 2", "step 3"]
    assert run.isolation in ("bwrap", "process")
    assert run.worker and run.started_at and run.finished_at and run.heartbeat_at
    assert run.sealed_params == ""  # the sealed secret does not outlive the start


def test_an_agent_long_polls_a_run_to_its_end(worker, make_tool):
    make_tool("sleepy", language="python", source=SLEEPY_PY, inputs=SECONDS)
    _, raw = AgentToken.issue("agent", [Scope.TOOLS_INVOKE])
    api = Client(headers={"Authorization": f"Bearer {raw}"})
    invoked = api.post(
        "/api/v1/tools/sleepy/invoke", {"params": {"seconds": 1}}, content_type="application/json"
    ).json()

    # Each answer comes when something happened: a new status or update, or the end.
    seen, after, status = [], 0, "queued"
    for _ in range(40):
        body = api.get(f"{invoked['url']}?wait=25&after={after}").json()
        seen.append(body["status"])
        after = max([after, *(u["seq"] for u in body["updates"])])
        status = body["status"]
        if status not in ("queued", "running"):
            break

    assert status == RunStatus.SUCCEEDED and after == 1
    assert len(seen) <= 5


def test_later_runs_start_in_spare_sandboxes(worker, make_tool):
    require(isolation_level()[0] != "bwrap", "spare sandboxes need bubblewrap")
    tool = make_tool(
        "greet", source=PROGRESS_TS, inputs={"name": {"type": "string", "description": "Who."}}
    )
    work = worker.state_dir / "runs"
    seen: set[str] = set()
    # Three runs on two worker processes: one process runs twice and, the second time,
    # gets the spare it started after its first run.
    for name in ("Ada", "Grace", "Edsger"):
        run = wait_for_run(start(tool, {"name": name}).pk, FINISHED, worker=worker)
        assert run.result["content"][0]["text"] == f"hello {name}", run.result
        deadline = time.monotonic() + 20
        while not (spares := {p.name for p in work.glob("spare-*")} - seen):
            assert time.monotonic() < deadline, "no spare sandbox was started"
            time.sleep(0.05)
        seen |= spares
    assert seen - {p.name for p in work.glob("spare-*")}, "no spare was handed to a run"
    assert Run.objects.filter(tool=tool, spare=True).exists()
    assert Run.objects.filter(tool=tool, spare=False).exists()  # the first one

    worker.stop()  # its pool processes take their spares down, folders included
    assert not any(work.glob("spare-*"))


def test_it_runs_a_second_run_while_one_is_running(worker, make_tool):
    sleepy = make_tool("sleepy", language="python", source=SLEEPY_PY, inputs=SECONDS)
    quick = make_tool("quick", language="python", source=QUICK_PY)
    long_run = start(sleepy, {"seconds": 30})
    wait_for_run(long_run.pk, (RunStatus.RUNNING,), worker=worker)

    quick_run = wait_for_run(start(quick).pk, FINISHED, worker=worker)

    assert quick_run.status == RunStatus.SUCCEEDED
    assert Run.objects.get(pk=long_run.pk).status == RunStatus.RUNNING
    cancel.cancel_run(long_run, Actor.system())
    assert wait_for_run(long_run.pk, FINISHED, worker=worker).status == RunStatus.CANCELLED


def test_it_kills_a_tool_that_ignores_cancel_after_the_grace_period(worker, make_tool):
    # The tool ignores its abort signal: the runner's grace period then kills it.
    stubborn = make_tool(
        "stubborn",
        language="python",
        source="import time\n\ndef execute(tool_call_id, params, signal, on_update):\n"
        "    on_update({'content': [{'type': 'text', 'text': 'going'}]})\n"
        "    time.sleep(300)\n",
    )
    run = start(stubborn)
    wait_for_run(run.pk, (RunStatus.RUNNING,), worker=worker)
    # Started: wait for its first update so the tool process is surely up.
    deadline = time.monotonic() + 30
    while not run.updates.exists() and time.monotonic() < deadline:
        time.sleep(0.05)

    cancel.cancel_run(run, Actor.system())
    run = wait_for_run(run.pk, FINISHED, worker=worker)

    assert run.status == RunStatus.CANCELLED
    assert run.result["isError"] is True
    # Killed at the end of the grace period, not left to sleep its 300 s.
    text = run.result["content"][0]["text"]
    assert "the tool ignored the abort signal and was killed after 5 s" in text, text


def test_it_marks_the_run_of_a_killed_worker_lost(worker, make_tool, settings):
    settings.RUN_LOST_AFTER_SECONDS = 3
    token, raw = AgentToken.issue("agent", [Scope.TOOLS_INVOKE])
    sleepy = make_tool("sleepy", language="python", source=SLEEPY_PY, inputs=SECONDS)
    api = Client(headers={"Authorization": f"Bearer {raw}"})
    response = api.post(
        "/api/v1/tools/sleepy/invoke", {"params": {"seconds": 20}}, content_type="application/json"
    )
    assert response.status_code == 202, response.content
    run_id = response.json()["run"]
    wait_for_run(run_id, (RunStatus.RUNNING,), worker=worker)

    worker.kill()
    # No worker is left to run the periodic reaper: reading the run reaps it.
    deadline = time.monotonic() + 30
    status = "running"
    while status == "running" and time.monotonic() < deadline:
        time.sleep(0.5)
        status = api.get(f"/api/v1/runs/{run_id}").json()["status"]

    assert status == RunStatus.LOST
    run = Run.objects.get(pk=run_id)
    assert "stopped answering" in run.error and run.result["isError"] is True

    # A new worker serves the next run; the lost one is not run again.
    worker.start()
    assert wait_for_run(start(sleepy, {"seconds": 0.1}).pk, FINISHED, worker=worker).status == (
        RunStatus.SUCCEEDED
    )
    assert Run.objects.get(pk=run_id).status == RunStatus.LOST


HOSTILE = {
    # name: (language, source, inputs)
    "flood": ("bash", "#!/bin/bash\nhead -c 104857600 /dev/zero | tr '\\0' x\n"),
    "forker": ("bash", "#!/bin/bash\nf() { f | f & }; f\nsleep 30\n"),
    "hog": (
        "python",
        "def execute(tool_call_id, params, signal, on_update):\n"
        "    blocks = []\n"
        "    while True:\n"
        "        blocks.append(bytearray(64 << 20))\n",
    ),
    "crasher": (
        "python",
        "import os\n\ndef execute(tool_call_id, params, signal, on_update):\n"
        "    os.kill(os.getpid(), 9)\n",
    ),  # fmt: skip
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_it_keeps_serving_after_a_hostile_tool(worker, make_tool, settings, name):
    language, source = HOSTILE[name]
    hostile = make_tool(name, language=language, source=source)
    quick = make_tool("quick", language="python", source=QUICK_PY)

    run = wait_for_run(start(hostile, timeout=20).pk, FINISHED, timeout=60, worker=worker)

    text = run.result["content"][0]["text"]
    if name == "flood":
        # Not an error: the text is kept up to the 1 MiB limit, with a notice.
        assert len(text.encode()) <= (1 << 20) + 200 and "truncated" in text
    else:
        assert run.status in (RunStatus.FAILED, RunStatus.TIMED_OUT), run.result
        assert run.result["isError"] is True and text
    assert worker.alive
    after = wait_for_run(start(quick).pk, FINISHED, worker=worker)
    assert after.status == RunStatus.SUCCEEDED
