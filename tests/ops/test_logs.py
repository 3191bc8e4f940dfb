"""Structured logs (tools_app/ops/logcontext.py): JSON lines with a request id and a run id,
the X-Request-ID a request gets and gives back, the run that keeps its request id, the run
page that shows both, and CONSOLE_LOG_FORMAT. The real-worker proof (one request id in the
web's and the worker's lines, no secret in either) is tests/ops/test_observability_worker.py."""

from __future__ import annotations

import json
import logging
import subprocess
import sys

import pytest

from tests.support import REPO, console_env
from tools_app.audit import Actor
from tools_app.models import Run
from tools_app.models.runs import RunVia
from tools_app.ops import logcontext
from tools_app.runs import start

pytestmark = pytest.mark.django_db


class Collect(logging.Handler):
    """The JSON lines a handler configured like settings.LOGGING's writes."""

    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(logcontext.JsonFormatter())
        self.addFilter(logcontext.ContextFilter())
        self.lines: list[dict] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(json.loads(self.format(record)))


@pytest.fixture
def lines():
    handler = Collect()
    root = logging.getLogger()
    root.addHandler(handler)
    yield handler.lines
    root.removeHandler(handler)


def test_a_json_line_has_time_level_logger_message_and_ids():
    formatter = logcontext.JsonFormatter()
    record = logging.LogRecord("tools_app.runs", logging.WARNING, __file__, 1, "a %s", ("b",), None)
    with logcontext.bound(request="req-12345678", run="run-1"):
        line = json.loads(formatter.format(record))
    assert line["level"] == "WARNING" and line["logger"] == "tools_app.runs"
    assert line["message"] == "a b"
    assert line["request_id"] == "req-12345678" and line["run_id"] == "run-1"
    assert line["time"].endswith("Z") and "T" in line["time"]


def test_a_json_line_holds_the_traceback_and_stays_one_line():
    formatter = logcontext.JsonFormatter()
    try:
        raise ValueError("boom\nsecond line")
    except ValueError:
        record = logging.LogRecord("x", logging.ERROR, __file__, 1, "failed\n", (), sys.exc_info())
    text = formatter.format(record)
    assert "\n" not in text
    assert "ValueError: boom" in json.loads(text)["exc"]


def test_the_ids_are_forgotten_after_their_block():
    with logcontext.bound(request="r" * 10, run="x"):
        pass
    assert logcontext.request_id.get() == "" and logcontext.run_id.get() == ""


def test_each_response_names_its_request_id(client):
    first = client.get("/healthz")["X-Request-ID"]
    second = client.get("/healthz")["X-Request-ID"]
    assert len(first) == 32 and first != second


def test_a_tame_incoming_request_id_is_kept(client):
    response = client.get("/healthz", headers={"X-Request-ID": "lb-4f2a:9c1e.77_x"})
    assert response["X-Request-ID"] == "lb-4f2a:9c1e.77_x"


@pytest.mark.parametrize(
    "incoming",
    [
        "short",  # too short to tell requests apart
        "x" * 65,  # longer than the run row keeps
        "two words here",
        'quote"injection',
        "line\nbreak-forged-entry",
        "ünïcødé-request",
        "{}{}{}{}{}",
    ],
)
def test_an_odd_incoming_request_id_is_replaced(client, incoming, lines):
    response = client.get("/healthz", headers={"X-Request-ID": incoming})
    assert response["X-Request-ID"] != incoming
    assert logcontext.REQUEST_ID_RE.fullmatch(response["X-Request-ID"])


def test_a_run_started_from_a_page_keeps_the_request_id(
    developer_client, make_tool, lines, django_capture_on_commit_callbacks
):
    make_tool("greet", inputs={"name": {"type": "string", "description": "Who."}})
    with django_capture_on_commit_callbacks(execute=False):
        response = developer_client.post(
            "/tools/greet/run/", {"name": "Ada"}, headers={"X-Request-ID": "trace-0001-abcd"}
        )
    assert response.status_code in (200, 302), response.content[:500]
    run = Run.objects.get()
    assert run.request_id == "trace-0001-abcd"
    queued = [line for line in lines if line["message"].startswith(f"run {run.pk} queued")]
    assert queued and queued[0]["request_id"] == "trace-0001-abcd"
    assert queued[0]["run_id"] == str(run.pk)


def test_the_celery_message_carries_the_request_id(
    make_tool, monkeypatch, django_capture_on_commit_callbacks
):
    from console.celery import app

    sent = []
    monkeypatch.setattr(app, "send_task", lambda name, **kw: sent.append((name, kw)))
    tool = make_tool("greet")
    # The commit comes after the request's block: the id was taken when the run started.
    with (
        django_capture_on_commit_callbacks(execute=True),
        logcontext.bound(request="trace-0002-abcd"),
    ):
        run = start.start_run(tool.published_version, {}, actor=Actor.system(), via=RunVia.API)
    [(name, kw)] = sent
    assert name == start.EXECUTE_RUN_TASK and kw["args"] == [str(run.pk)]
    assert kw["headers"] == {start.REQUEST_ID_HEADER: "trace-0002-abcd"}
    assert run.request_id == "trace-0002-abcd"


def test_the_worker_binds_the_run_and_request_ids_for_the_task():
    from console import celery as console_celery

    class Request:
        console_request_id = "trace-0003-abcd"

    class Task:
        name = start.EXECUTE_RUN_TASK
        request = Request()

    console_celery.bind_log_context(task=Task(), args=["8c5e0d2c-run"])
    try:
        assert logcontext.request_id.get() == "trace-0003-abcd"
        assert logcontext.run_id.get() == "8c5e0d2c-run"
    finally:
        console_celery.clear_log_context()
    assert logcontext.request_id.get() == "" and logcontext.run_id.get() == ""


def test_a_forged_request_id_in_a_message_is_dropped():
    from console import celery as console_celery

    class Request:
        console_request_id = "x\n{'level': 'CRITICAL'}"

    class Task:
        name = "tools_app.tasks.reap_lost_runs"
        request = Request()

    console_celery.bind_log_context(task=Task(), args=[])
    try:
        assert logcontext.request_id.get() == "" and logcontext.run_id.get() == ""
    finally:
        console_celery.clear_log_context()


def test_the_run_page_shows_its_run_id_and_request_id(viewer_client, make_tool, lines):
    tool = make_tool("greet")
    run = Run.objects.create(
        tool=tool, version=tool.published_version, via=RunVia.API, request_id="trace-0004-abcd"
    )
    logging.getLogger("tools_app.test").info("inside")  # outside any request: no ids

    page = viewer_client.get(f"/runs/{run.pk}/")

    assert f'<code id="run-id">{run.pk}</code>'.encode() in page.content
    assert b'<code id="run-request-id">trace-0004-abcd</code>' in page.content
    assert lines[0]["run_id"] == "" and lines[0]["request_id"] == ""


def test_a_run_pages_log_lines_carry_its_run_id(viewer_client, make_tool, lines, monkeypatch):
    from tools_app.views import runs as run_views

    tool = make_tool("greet")
    run = Run.objects.create(tool=tool, version=tool.published_version, via=RunVia.API)
    real = run_views.live_context

    def logged(*args, **kwargs):
        logging.getLogger("tools_app.views").info("rendering a run")
        return real(*args, **kwargs)

    monkeypatch.setattr(run_views, "live_context", logged)
    response = viewer_client.get(f"/runs/{run.pk}/updates/", headers={"HX-Request": "true"})

    assert response.status_code == 200
    [line] = [line for line in lines if line["message"] == "rendering a run"]
    assert line["run_id"] == str(run.pk)
    assert line["request_id"] == response["X-Request-ID"]


# --- CONSOLE_LOG_FORMAT, in a fresh process ------------------------------------------------


def log_line(tmp_path, **env: str) -> str:
    code = (
        "import django, logging\ndjango.setup()\n"
        "logging.getLogger('tools_app.test').warning('hello %s', 'there')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=console_env(tmp_path, fresh=True, DJANGO_SETTINGS_MODULE="console.settings", **env),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stderr.strip().splitlines()[-1]


def test_production_logs_json_by_default(tmp_path):
    line = json.loads(log_line(tmp_path, CONSOLE_SECRET_KEY="k" * 50))
    assert line["message"] == "hello there" and line["level"] == "WARNING"


def test_development_logs_plain_text_by_default(tmp_path):
    line = log_line(tmp_path)
    assert line.endswith("WARNING tools_app.test hello there")


def test_log_format_overrides_the_default(tmp_path):
    assert log_line(tmp_path, CONSOLE_SECRET_KEY="k" * 50, CONSOLE_LOG_FORMAT="plain").endswith(
        "hello there"
    )
    assert json.loads(log_line(tmp_path, CONSOLE_LOG_FORMAT="JSON"))["logger"] == "tools_app.test"


def test_an_unknown_log_format_is_refused(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        env=console_env(
            tmp_path,
            fresh=True,
            DJANGO_SETTINGS_MODULE="console.settings",
            CONSOLE_LOG_FORMAT="xml",
        ),  # fmt: skip
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    assert "CONSOLE_LOG_FORMAT must be plain or json" in done.stderr
