"""Who may read a run's output (its result, progress updates, standard error and an http
tool's response): the same people as may download its artifacts (Run.can_download), the
run's own starter and admins. The reported gap: every viewer read results while
artifacts of the same kind were restricted. Others still see that the run happened, its
inputs (sensitive ones masked), status, notices and why it ended. Through the API a run is
its own token's only (tests/runs/test_artifact_access.py)."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from tests.support import make_user
from tools_app.audit import Actor
from tools_app.models import Run, Tool
from tools_app.models.runs import RunStatus, RunVia
from tools_app.roles import DEVELOPER
from tools_app.runs import execute as run_execute
from tools_app.runs import start

pytestmark = pytest.mark.django_db

RESULT = "result-canary-41c7"
PROGRESS = "progress-canary-9e02"
STDERR = "stderr-canary-5a18"
TOOL_PY = f"""
import sys

def execute(tool_call_id, params, signal, on_update):
    on_update({{"content": [{{"type": "text", "text": "{PROGRESS}"}}]}})
    print("{STDERR}", file=sys.stderr)
    return {{"content": [{{"type": "text", "text": "{RESULT}"}}]}}
"""
CANARIES = (RESULT, PROGRESS, STDERR)


@pytest.fixture
def run(make_tool, developer) -> Run:
    tool: Tool = make_tool("speaker", language="python", source=TOOL_PY)
    run = start.start_run(
        tool.published_version, {}, actor=Actor(user=developer), via=RunVia.BROWSER,
        enqueue=False,
    )  # fmt: skip
    run = run_execute.execute_run(run.pk)
    assert run.status == RunStatus.SUCCEEDED, run.result
    return run


def pages(client: Client, run: Run) -> str:
    """The run page and its live fragment (htmx polling), as that client gets them."""
    detail = client.get(reverse("run", args=[run.pk]))
    live = client.get(reverse("run_updates", args=[run.pk]), {"after": 0})
    assert detail.status_code == live.status_code == 200
    return detail.content.decode() + live.content.decode()


def test_viewers_and_other_developers_do_not_read_the_output(run, viewer_client):
    other = Client()
    other.force_login(make_user("otto", DEVELOPER))
    for client in (viewer_client, other):
        html = pages(client, run)
        for canary in CANARIES:
            assert canary not in html, canary
        # What they do see: the run, how it ended, and why the output is not shown.
        assert "Succeeded" in html and "speaker" in html
        assert "Only the person who started this run, or an admin, may see its result" in html


def test_the_starter_and_admins_read_the_output(run, developer_client, console_admin_client):
    for client in (developer_client, console_admin_client):
        html = pages(client, run)
        for canary in CANARIES:
            assert canary in html, canary
        assert "may see its result" not in html
