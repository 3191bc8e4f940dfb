"""`manage.py run_tool`: runs in this process through the runner (no worker)."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import CommandError, call_command

from tools_app.models import Run
from tools_app.models.runs import RunStatus, RunVia

pytestmark = pytest.mark.django_db

GREET_PY = """
import time

def execute(tool_call_id, params, signal, on_update):
    on_update({"content": [{"type": "text", "text": "warming up"}]})
    if params.get("fail"):
        return {"content": [{"type": "text", "text": "it broke"}], "isError": True}
    if params.get("sleep"):
        time.sleep(params["sleep"])
    return {"content": [{"type": "text", "text": f"hello {params['name']}"}]}
"""

INPUTS = {
    "name": {"type": "string", "description": "Who."},
    "fail": {"type": "boolean", "description": "Fail.", "optional": True},
    "sleep": {"type": "number", "description": "Sleep.", "optional": True},
    "key": {"type": "string", "description": "Key.", "sensitive": True, "optional": True},
}


@pytest.fixture
def greet(make_tool):
    return make_tool("greet", language="python", source=GREET_PY, inputs=INPUTS)


def run_tool(*args: str, stdin: str | None = None, monkeypatch=None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    if stdin is not None:
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    try:
        call_command("run_tool", *args, stdout=out, stderr=err, skip_checks=True)
        code = 0
    except CommandError as exc:
        err.write(str(exc))
        code = exc.returncode
    return code, out.getvalue(), err.getvalue()


def test_it_prints_progress_to_stderr_and_the_result_to_stdout(greet):
    code, out, err = run_tool("greet", "--params", '{"name": "Ada"}')

    assert code == 0
    assert json.loads(out) == {"content": [{"type": "text", "text": "hello Ada"}], "isError": False}
    assert "progress: warming up" in err
    run = Run.objects.get()
    assert run.via == RunVia.COMMAND and run.status == RunStatus.SUCCEEDED
    assert f"run {run.pk}: succeeded" in err


def test_it_exits_1_when_the_tool_reports_an_error(greet):
    code, out, _ = run_tool("greet", "--params", '{"name": "Ada", "fail": true}')

    assert code == 1
    assert json.loads(out)["isError"] is True


def test_it_applies_the_timeout(greet):
    code, out, _ = run_tool("greet", "--params", '{"name": "Ada", "sleep": 30}', "--timeout", "1")

    assert code == 1
    assert json.loads(out)["isError"] is True
    assert Run.objects.get().status == RunStatus.TIMED_OUT


def test_it_runs_a_given_version_even_a_draft(greet, make_tool):
    make_tool("greet", language="python", source=GREET_PY.replace("hello", "howdy"),
              inputs=INPUTS, publish=False)  # fmt: skip

    assert "hello" in run_tool("greet", "--params", '{"name": "A"}')[1]  # the published one
    assert "howdy" in run_tool("greet", "--version", "2", "--params", '{"name": "A"}')[1]


def test_it_reads_params_from_stdin_and_masks_sensitive_ones(greet, monkeypatch):
    code, _, err = run_tool(
        "greet", "--params", "-", stdin='{"name": "Ada", "key": "sk-9999"}', monkeypatch=monkeypatch
    )

    assert code == 0
    assert Run.objects.get().params["key"] == "••••••"
    assert "sk-9999" not in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nope"], "no tool is named 'nope'"),
        (["../etc"], "no tool is named"),
        (["greet", "--version", "7"], "greet has no version 7"),
        (["greet", "--params", "{nope"], "--params is not valid JSON"),
        (["greet", "--params", "[" * 100_000 + "]" * 100_000], "--params is not usable JSON"),
        (["greet", "--params", '{"fail": "yes", "x": 1}'], "invalid params"),
        (["greet", "--params", '{"name": "A"}', "--timeout", "0"], "--timeout must be"),
    ],
)
def test_it_exits_2_on_bad_usage(greet, args, message):
    code, out, err = run_tool(*args)

    assert code == 2
    assert message in err and out == ""
    assert not Run.objects.exists() or "invalid params" not in message


def test_it_lists_every_params_problem(greet):
    _, _, err = run_tool("greet", "--params", '{"fail": "yes", "x": 1}')

    assert "params: name: is required" in err
    assert "params: fail: must be true or false, got a string" in err
    assert "params: x: unknown parameter" in err
