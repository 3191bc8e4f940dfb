"""tools_app.runs.execute: start, execute (in this process, through the real runner), cancel,
claim once, reap, masking and sealing."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from tests.support import require, unprivileged
from tools_app.audit import Actor
from tools_app.integrations import vault
from tools_app.integrations.service import create_integration
from tools_app.models import AuditEvent, Run
from tools_app.models.runs import RunStatus, RunVia
from tools_app.runner import teardown
from tools_app.runs import cancel, reaper, setup
from tools_app.runs import execute as run_execute
from tools_app.runs import start as run_start

pytestmark = pytest.mark.django_db

ECHO_PY = """
import os, time

def execute(tool_call_id, params, signal, on_update):
    on_update({"content": [{"type": "text", "text": "first"}]})
    time.sleep(0.05)
    on_update({"content": [{"type": "text", "text": "key is " + params.get("key", "-")}]})
    text = f"hello {params['name']} {params.get('key', '')}"
    return {"content": [{"type": "text", "text": text}]}
"""

INPUTS = {
    "name": {"type": "string", "description": "Who to greet."},
    "count": {"type": "integer", "description": "How often.", "optional": True, "default": 1},
    "key": {"type": "string", "description": "An API key.", "sensitive": True, "optional": True},
}

SLEEPY_PY = """
import time

def execute(tool_call_id, params, signal, on_update):
    for i in range(600):
        if signal.aborted:
            return {"content": [{"type": "text", "text": "stopped early"}], "isError": True}
        on_update({"content": [{"type": "text", "text": f"tick {i}"}]})
        time.sleep(0.1)
    return {"content": [{"type": "text", "text": "done"}]}
"""


@pytest.fixture
def echo(make_tool):
    return make_tool("echo", language="python", source=ECHO_PY, inputs=INPUTS)


def start(tool, params, **kw) -> Run:
    kw.setdefault("actor", Actor.system())
    kw.setdefault("via", RunVia.COMMAND)
    kw.setdefault("enqueue", False)
    return run_start.start_run(tool.published_version, params, **kw)


def test_it_refuses_invalid_params_listing_every_problem(echo):
    with pytest.raises(run_start.InvalidParams) as caught:
        start(echo, {"count": "three", "colour": "red"})

    assert caught.value.errors == [
        "colour: unknown parameter (allowed: name, count, key)",
        "count: must be an integer, got a string",
        "name: is required",
    ]
    assert not Run.objects.exists()


def test_it_masks_and_seals_sensitive_inputs(echo, developer):
    run = start(echo, {"name": "Ada", "key": "sk-live-123456"}, actor=Actor(user=developer))

    assert run.params == {"name": "Ada", "key": run_start.MASK, "count": 1}
    assert run.status == RunStatus.QUEUED and run.user == developer
    assert "sk-live-123456" not in run.sealed_params
    assert json.loads(vault.decrypt(run.sealed_params)) == {"key": "sk-live-123456"}
    event = AuditEvent.objects.get(action="run.start")
    assert event.actor == developer.username and event.target_id == str(run.pk)
    assert "sk-live-123456" not in json.dumps([event.summary, event.data])


def test_it_queues_the_task_only_when_the_transaction_commits(
    echo, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        start(echo, {"name": "Ada"}, enqueue=True)
        start(echo, {"name": "Bob"}, enqueue=False)

    assert len(callbacks) == 1


def test_it_executes_a_run_and_stores_progress_result_and_timings(echo, settings):
    run = start(echo, {"name": "Ada", "key": "sk-live-123456"})
    seen = []

    run = run_execute.execute_run(run.pk, on_progress=seen.append)

    assert run.status == RunStatus.SUCCEEDED
    # The sensitive value is redacted from everything stored about the run.
    assert run.result == {
        "content": [{"type": "text", "text": "hello Ada {{input.key}}"}],
        "isError": False,
    }
    updates = list(run.updates.values_list("seq", "content"))
    assert updates == [
        (1, [{"type": "text", "text": "first"}]),
        (2, [{"type": "text", "text": "key is {{input.key}}"}]),
    ]
    assert seen == [content for _, content in updates]
    assert run.sealed_params == ""
    assert run.isolation in ("bwrap", "process")
    assert run.exit_code == 0 and run.duration > 0
    assert run.started_at <= run.finished_at and run.heartbeat_at is not None
    assert run.worker
    # The materialized tool and the runner's work dir are gone, once freed (in the
    # background: tools_app/runner/teardown.py).
    assert teardown.drain()
    assert not (Path(settings.RUNS_WORK_PATH) / str(run.pk)).exists()


def test_it_claims_a_run_only_once(echo):
    run = start(echo, {"name": "Ada"})
    assert run_execute.claim(run.pk) is True
    assert run_execute.claim(run.pk) is False
    # A second delivery of the task finds the run taken and does nothing.
    assert run_execute.execute_run(run.pk) is None
    assert Run.objects.get(pk=run.pk).updates.count() == 0


def test_it_executes_a_delivered_task_once(echo):
    run = start(echo, {"name": "Ada"})
    assert run_execute.execute_run(run.pk).status == RunStatus.SUCCEEDED
    assert run_execute.execute_run(run.pk) is None
    assert Run.objects.get(pk=run.pk).updates.count() == 2


def test_it_ignores_an_unknown_run():
    assert run_execute.execute_run("00000000-0000-0000-0000-000000000000") is None


def test_it_cancels_a_queued_run_at_once(echo, developer):
    run = start(echo, {"name": "Ada", "key": "sk-live-123456"})

    assert cancel.cancel_run(run, Actor(user=developer)) is True

    assert run.status == RunStatus.CANCELLED and run.finished_at is not None
    assert run.sealed_params == "" and run.result["isError"] is True
    assert run_execute.execute_run(run.pk) is None  # the task arrives later: nothing runs
    assert AuditEvent.objects.filter(action="run.cancel", target_id=str(run.pk)).exists()
    assert cancel.cancel_run(run, Actor(user=developer)) is False  # already ended


def test_it_stops_a_running_run_when_cancel_is_requested(make_tool):
    sleepy = make_tool("sleepy", language="python", source=SLEEPY_PY)
    run = start(sleepy, {})
    requested = []

    def cancel_on_first_update(content):
        # Called in the supervising thread, like a cancel from another process would
        # land in the database.
        if not requested:
            requested.append(cancel.cancel_run(Run.objects.get(pk=run.pk), Actor.system()))

    run = run_execute.execute_run(run.pk, on_progress=cancel_on_first_update)

    assert requested == [True]
    assert run.status == RunStatus.CANCELLED
    assert run.cancel_requested and run.result["isError"] is True
    # The tool saw its abort signal and returned (not killed after the grace period).
    texts = [block["text"] for block in run.result["content"]]
    assert "stopped early" in texts and "killed" not in " ".join(texts)


def test_it_applies_a_timeout_override(make_tool):
    sleepy = make_tool("sleepy", language="python", source=SLEEPY_PY)
    run = run_execute.execute_run(start(sleepy, {}, timeout=1).pk)

    assert run.status == RunStatus.TIMED_OUT
    assert run.timeout == 1 and run.result["isError"] is True


DEMO_TYPE = """\
label: Demo
description: A demo service.
fields:
  - name: url
    env: DEMO_URL
    kind: url
    required: true
  - name: token
    env: DEMO_TOKEN
    secret: true
    required: true
"""

ENV_PY = """
import os

def execute(tool_call_id, params, signal, on_update):
    names = sorted(k for k in os.environ if k.startswith(("DEMO_", "OTHER_")))
    text = ", ".join(f"{k}={os.environ[k]}" for k in names)
    return {"content": [{"type": "text", "text": text}]}
"""


@pytest.fixture
def demo_types(tmp_path, settings):
    folder = tmp_path / "types"
    folder.mkdir()
    (folder / "demo.yaml").write_text(DEMO_TYPE)
    settings.INTEGRATION_TYPES_PATH = folder
    return folder


def test_it_gives_a_tool_its_declared_integrations_with_secrets_redacted(make_tool, demo_types):
    for slug, token in (("demo", "tok-demo-987654"), ("other", "tok-other-555555")):
        create_integration(
            slug,
            "demo",
            actor=Actor.system(),
            values={"url": f"https://{slug}.example"},
            secrets={"token": token},
        )
    tool = make_tool("envy", language="python", source=ENV_PY, integrations=["demo"])

    run = run_execute.execute_run(start(tool, {}).pk)

    assert run.status == RunStatus.SUCCEEDED
    # Only the declared integration, and its secret replaced by its label.
    assert run.result["content"][0]["text"] == (
        "DEMO_TOKEN={{demo.token}}, DEMO_URL=https://demo.example"
    )


def test_it_fails_a_run_whose_integration_is_missing(make_tool, demo_types):
    tool = make_tool("envy", language="python", source=ENV_PY, integrations=["demo"])

    run = run_execute.execute_run(start(tool, {}).pk)

    assert run.status == RunStatus.FAILED
    assert "integration 'demo' is not configured" in run.error
    assert run.result == setup.error_result(run.error)


def test_it_fails_a_run_whose_sealed_inputs_cannot_be_decrypted(echo, settings):
    run = start(echo, {"name": "Ada", "key": "sk-live-123456"})
    # The key that sealed them is gone.
    settings.ENCRYPTION_KEY_FILE = Path(settings.ENCRYPTION_KEY_FILE).with_name("other.key")

    run = run_execute.execute_run(run.pk)

    assert run.status == RunStatus.FAILED
    assert "cannot be decrypted" in run.error
    assert run.sealed_params == ""


def _running(tool, *, beat_age: float) -> Run:
    run = start(tool, {"name": "Ada"})
    then = timezone.now() - timedelta(seconds=beat_age)
    Run.objects.filter(pk=run.pk).update(
        status=RunStatus.RUNNING, started_at=then, heartbeat_at=then, worker="w:1"
    )
    return Run.objects.get(pk=run.pk)


def test_it_reaps_runs_whose_heartbeat_stopped(echo, settings):
    settings.RUN_LOST_AFTER_SECONDS = 30
    stale = _running(echo, beat_age=31)
    fresh = _running(echo, beat_age=5)

    assert reaper.reap_lost_runs() == 1

    stale.refresh_from_db()
    fresh.refresh_from_db()
    assert stale.status == RunStatus.LOST and stale.finished_at is not None
    assert "stopped answering" in stale.error and stale.result["isError"] is True
    assert fresh.status == RunStatus.RUNNING
    assert AuditEvent.objects.filter(action="run.lost", actor="system").count() == 1
    assert reaper.reap_lost_runs() == 0


def test_it_finds_stale_and_unclaimed_runs_on_the_queryset(echo):
    now = timezone.now()
    cutoff = now - timedelta(seconds=30)
    dead = _running(echo, beat_age=31)
    alive = _running(echo, beat_age=5)
    never_beat = _running(echo, beat_age=31)
    Run.objects.filter(pk=never_beat.pk).update(heartbeat_at=None)
    assert set(Run.objects.stale(cutoff)) == {dead, never_beat}
    assert alive not in Run.objects.stale(cutoff)

    old, new, resent_long_ago, resent_now = (start(echo, {"name": "Ada"}) for _ in range(4))
    Run.objects.filter(pk__in=[old.pk, resent_long_ago.pk, resent_now.pk]).update(
        created_at=now - timedelta(seconds=60)
    )
    Run.objects.filter(pk=resent_long_ago.pk).update(resent_at=now - timedelta(seconds=31))
    Run.objects.filter(pk=resent_now.pk).update(resent_at=now)
    assert set(Run.objects.unclaimed(cutoff)) == {old, resent_long_ago}
    assert new not in Run.objects.unclaimed(cutoff)


def test_it_reaps_a_stale_run_when_someone_looks_at_it(echo, settings):
    settings.RUN_LOST_AFTER_SECONDS = 3
    assert reaper.reap_if_stale(_running(echo, beat_age=10)).status == RunStatus.LOST
    assert reaper.reap_if_stale(_running(echo, beat_age=1)).status == RunStatus.RUNNING


def test_it_lets_a_reaped_run_that_was_alive_report_its_real_ending(echo, settings):
    run = start(echo, {"name": "Ada"})
    settings.RUN_LOST_AFTER_SECONDS = 0

    def reap_meanwhile(content):
        reaper.reap_lost_runs()

    run = run_execute.execute_run(run.pk, on_progress=reap_meanwhile)

    assert run.status == RunStatus.SUCCEEDED


@unprivileged.when_root
def test_it_records_why_a_run_had_the_process_fallback(echo, monkeypatch):
    monkeypatch.setenv("TOOL_CONSOLE_SANDBOX", "process")

    run = run_execute.execute_run(start(echo, {"name": "Ada"}).pk)

    assert run.status == RunStatus.SUCCEEDED
    assert run.isolation == "process"
    assert "TOOL_CONSOLE_SANDBOX" in run.isolation_reason
    assert any("fallback sandbox" in w.text for w in run_execute.isolation_warnings())


def test_it_records_no_reason_under_bwrap(echo, monkeypatch):
    monkeypatch.delenv("TOOL_CONSOLE_SANDBOX", raising=False)
    require(
        run_execute.runner.isolation_level()[0] != "bwrap", "bubblewrap cannot run on this host"
    )
    run = run_execute.execute_run(start(echo, {"name": "Ada"}).pk)
    assert run.isolation == "bwrap" and run.isolation_reason == ""
    assert run_execute.isolation_warnings() == []


def test_it_lets_email_db_read_the_database_its_integration_names(db, tmp_path, settings):
    """The sandbox sees only the tool folder, plus the declared integrations' path fields,
    bound read-only: the seed email_db tool reads a database that lives elsewhere."""
    import sqlite3

    from django.core.management import call_command

    from tests.support import REPO
    from tools_app.catalog.sync import sync_tools
    from tools_app.models import Tool

    archive = tmp_path / "mail" / "archive.sqlite3"
    archive.parent.mkdir()
    with sqlite3.connect(archive) as conn:
        conn.execute("create table messages (id integer primary key, subject text)")
        conn.executemany("insert into messages (subject) values (?)", [("hi",), ("re: hi",)])
    conn.close()
    settings.INTEGRATION_TYPES_PATH = REPO / "seed" / "integrations"
    call_command("set_integration", "email_db", "--type", "email_db", "--field", f"path={archive}")
    sync_tools(REPO / "seed" / "tools")
    version = Tool.objects.get(name="email_db").published_version

    run = run_start.start_run(
        version,
        {"sql": "select count(*) as n from messages"},
        actor=Actor.system(),
        via=RunVia.COMMAND,
        enqueue=False,
    )
    run = run_execute.execute_run(run.pk)

    assert run.status == RunStatus.SUCCEEDED, (run.error, run.result)
    assert "2" in run.result["content"][0]["text"]
    # A statement that writes is refused with a message, and the archive keeps its rows
    # (the tool opens it read-only; tests/runner/test_runner.py checks the bind itself).
    # The first statement stops at the tool's SELECT check; the second gets past it (it
    # starts with WITH) and is stopped by the read-only connection beneath.
    refusals = {
        "delete from messages": "only a single SELECT (or WITH ... SELECT) statement is "
        "allowed, not DELETE: email_db is read-only",
        "with doomed as (select 1) delete from messages": "email_db is read-only",
    }
    for sql, message in refusals.items():
        write = run_start.start_run(
            version, {"sql": sql}, actor=Actor.system(), via=RunVia.COMMAND, enqueue=False
        )
        write = run_execute.execute_run(write.pk)
        assert write.result["isError"] is True, write.result
        assert message in write.result["content"][0]["text"], write.result
    with sqlite3.connect(archive) as conn:
        assert conn.execute("select count(*) from messages").fetchone() == (2,)
    conn.close()


def test_it_parses_each_unsaved_version_for_itself(db):
    """The editor's stand-in for the next draft has no id or hash: two such versions of
    different tools must not share a remembered manifest."""
    from tests.support import tool_files
    from tools_app.models import ToolVersion

    first, second = (
        ToolVersion(toolmd=tool_files(name)["TOOL.md"].decode(), manifest={}, files={})
        for name in ("first_tool", "second_tool")
    )
    assert setup.manifest_of(first).name == "first_tool"
    assert setup.manifest_of(second).name == "second_tool"
