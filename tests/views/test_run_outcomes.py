"""The run page after real runs: each run is started the way a person (or an agent) starts
it, executed by the real runner (run_execute.execute_run, what a worker does), and the page is
read as text, the way a person reads it."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest
from django.test import Client
from django.urls import reverse

from tests.support import unprivileged
from tests.support.forms import find_form, submit
from tools_app.models import AgentToken, Run
from tools_app.models.runs import RunStatus
from tools_app.models.tokens import Scope
from tools_app.runs import execute as run_execute

pytestmark = pytest.mark.django_db

NAME = {"name": {"type": "string", "description": "Who to greet."}}


class _Text(HTMLParser):
    """Text outside <head>, <script>, <style> and elements marked `hidden`."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._hiding: list[str] = []  # open tags whose content is not shown

    def handle_starttag(self, tag, attrs) -> None:
        nested = bool(self._hiding) and tag == self._hiding[-1]
        hidden = tag in ("script", "style", "head") or any(n == "hidden" for n, _ in attrs)
        if nested or hidden:
            self._hiding.append(tag)

    def handle_endtag(self, tag) -> None:
        if self._hiding and tag == self._hiding[-1]:
            self._hiding.pop()

    def handle_data(self, data) -> None:
        if not self._hiding:
            self.parts.append(data)


def text_of(html: str) -> str:
    """What a person reads: the page's text, whitespace collapsed."""
    parser = _Text()
    parser.feed(html)
    return " ".join(" ".join(parser.parts).split())


def run_from_the_form(client: Client, tool: str, **params: str) -> Run:
    """Fill in the run form, press Run, and have the runner execute the run."""
    response = submit(client, reverse("tool_run", args=[tool]), params, form_id="run-form")
    assert response.status_code == 302, response.content.decode()[:2000]
    run = Run.objects.get(pk=response["Location"].rstrip("/").rsplit("/", 1)[1])
    return run_execute.execute_run(run.pk)


def page(client: Client, run: Run) -> str:
    response = client.get(reverse("run", args=[run.pk]))
    assert response.status_code == 200
    return text_of(response.content.decode())


@pytest.fixture
def python_tool(make_tool):
    """Makes a Python tool whose execute() runs the given lines, after `imports`."""

    def make(name: str, *lines: str, imports: str = "", **options):
        head = f"import {imports}\n\n" if imports else ""
        body = "".join(f"    {line}\n" for line in lines)
        source = head + "def execute(tool_call_id, params, signal, on_update):\n" + body
        return make_tool(name, language="python", source=source, **options)

    return make


GREETS = """
def execute(tool_call_id, params, signal, on_update):
    on_update({"content": [{"type": "text", "text": "looking up " + params["name"]}]})
    return {"content": [{"type": "text", "text": "hello " + params["name"]}]}
"""


def test_a_successful_run(developer_client, make_tool):
    make_tool("greet", language="python", source=GREETS, inputs=NAME)

    run = run_from_the_form(developer_client, "greet", name="Ada")

    text = page(developer_client, run)
    assert "Succeeded" in text
    assert "started by dave from Browser" in text
    assert "name Ada" in text  # the inputs table
    assert "Progress" in text and "looking up Ada" in text
    assert "No progress updates" not in text
    assert "Result hello Ada Succeeded (exit code 0)." in text
    assert "Succeeded (exit code 0)." in text
    assert "Cancel" not in text.split("Progress")[1]


def test_a_run_whose_tool_reports_an_error(developer_client, python_tool):
    python_tool(
        "refuser",
        "return {'content': [{'type': 'text', 'text': 'the upstream said no'}], 'isError': True}",
    )

    run = run_from_the_form(developer_client, "refuser")

    assert run.status == RunStatus.FAILED
    text = page(developer_client, run)
    assert "Failed" in text
    assert "Result error the upstream said no" in text


def test_a_run_that_times_out(developer_client, python_tool):
    python_tool("slow", "time.sleep(60)", imports="time", extra={"timeout": 1})

    run = run_from_the_form(developer_client, "slow")

    text = page(developer_client, run)
    assert "Timed out" in text
    assert "Result error Timed out: the tool did not finish within 1 s" in text


def test_a_run_cancelled_from_its_page(developer_client, python_tool):
    python_tool(
        "patient",
        "on_update({'content': [{'type': 'text', 'text': 'working'}]})",
        "while not signal.aborted:",
        "    time.sleep(0.05)",
        "return {'content': [{'type': 'text', 'text': 'stopped as asked'}], 'isError': True}",
        imports="time",
    )
    response = submit(developer_client, reverse("tool_run", args=["patient"]), form_id="run-form")
    run = Run.objects.get()
    pressed = []

    def press_cancel(content) -> None:
        # The runner reports the first update while the tool runs: the person, watching
        # the page, presses its Cancel button then.
        if not pressed:
            html = developer_client.get(reverse("run", args=[run.pk])).content.decode()
            assert "working" in text_of(html)
            form = find_form(html, button="Cancel")
            pressed.append(developer_client.post(form.attrs["action"], form.data()))

    assert response.status_code == 302
    run = run_execute.execute_run(run.pk, on_progress=press_cancel)

    assert pressed[0].status_code == 302
    text = page(developer_client, run)
    assert "Cancelled" in text
    # The runner's word first, then what the tool said as it stopped.
    assert "Result Cancelled: the run was cancelled. stopped as asked" in text
    assert not find_cancel_button(developer_client, run)


def find_cancel_button(client: Client, run: Run) -> bool:
    return 'id="cancel-run"' in client.get(reverse("run", args=[run.pk])).content.decode()


def test_a_run_whose_tool_crashes_shows_its_stderr(developer_client, python_tool):
    python_tool(
        "crasher",
        "sys.stderr.write('boom: the disk is on fire\\n')",
        "sys.stderr.flush()",
        "os._exit(3)",
        imports="os, sys",
    )

    run = run_from_the_form(developer_client, "crasher")

    text = page(developer_client, run)
    assert "Failed" in text
    assert "The tool process exited with status 3 without returning a result." in text
    # What the tool wrote last, in the result and in the page's own stderr section.
    assert "Last output: boom: the disk is on fire" in text
    assert "Standard error (last 26 bytes) boom: the disk is on fire" in text
    assert "Process exit code 3" in text


def test_a_run_with_artifacts_and_notices(developer_client, python_tool):
    python_tool(
        "writer",
        "out = os.environ['TOOL_OUTPUT_DIR']",
        "open(os.path.join(out, 'report.txt'), 'w').write('the report body')",
        "os.symlink('/etc/passwd', os.path.join(out, 'sneaky'))",
        "return {'content': [{'type': 'text', 'text': 'wrote a report'}]}",
        imports="os",
    )

    run = run_from_the_form(developer_client, "writer")

    text = page(developer_client, run)
    assert "Artifacts report.txt 15 bytes" in text
    assert "artifact 'sneaky' skipped: a link, not followed" in text
    html = developer_client.get(reverse("run", args=[run.pk])).content.decode()
    (link,) = re.findall(r'<a href="([^"]+)" download>report.txt</a>', html)
    download = developer_client.get(link)
    assert b"".join(download.streaming_content) == b"the report body"


def test_a_run_whose_tool_returns_content_that_is_not_text(developer_client, python_tool):
    """Results are text blocks (docs/tool-format.md): an image block is a tool bug the page
    names, rather than a silently dropped part of the answer."""
    python_tool(
        "charts",
        "return {'content': [{'type': 'text', 'text': 'a chart:'},"
        " {'type': 'image', 'data': 'iVBORw0KGgo=', 'mimeType': 'image/png'}]}",
    )

    run = run_from_the_form(developer_client, "charts")

    text = page(developer_client, run)
    assert "Failed" in text
    assert "Result error The tool returned a malformed result:" in text
    assert "result['content'][1] must be {'type': 'text', 'text': str}" in text


def test_a_run_an_agent_started_with_a_token(viewer_client, console_admin_client, make_tool):
    make_tool("greet", language="python", source=GREETS, inputs=NAME)
    _, raw = AgentToken.issue("nightly-agent", [Scope.TOOLS_INVOKE])
    api = Client(headers={"Authorization": f"Bearer {raw}"})
    invoked = api.post(
        "/api/v1/tools/greet/invoke", {"params": {"name": "Grace"}}, content_type="application/json"
    )
    assert invoked.status_code == 202, invoked.content

    run = run_execute.execute_run(invoked.json()["run"])

    text = page(viewer_client, run)
    # RunVia.API reads "API" (0007_run_via_labels).
    assert "started by agent token “nightly-agent” from API" in text
    # A viewer sees that it succeeded; its output is the starter's and admins' only.
    assert "Succeeded" in text and "hello Grace" not in text
    assert "Run again with these inputs" not in text  # viewers read, they do not run
    assert "hello Grace" in page(console_admin_client, run)


@unprivileged.when_root
def test_a_fallback_run_shows_hostile_output_as_text(viewer_client, developer_client, python_tool,
                                                      monkeypatch):  # fmt: skip
    """Tool output is untrusted: the result and stderr are shown escaped, never as markup.
    The page also says the run had only the process fallback, and why."""
    monkeypatch.setenv("TOOL_CONSOLE_SANDBOX", "process")
    python_tool(
        "hostile",
        "sys.stderr.write('<img src=x onerror=alert(2)>\\n')",
        "return {'content': [{'type': 'text', 'text': '<script>alert(1)</script>'}],"
        " 'isError': True}",
        imports="sys",
    )

    run = run_from_the_form(developer_client, "hostile")

    # Its starter reads the output (a viewer may not: tests/runs/test_output_access.py).
    html = developer_client.get(reverse("run", args=[run.pk])).content.decode()
    assert "<script>alert" not in html and "<img src=x" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&lt;img src=x onerror=alert(2)&gt;" in html
    text = text_of(html)
    assert "Result error <script>alert(1)</script>" in text
    assert "sandbox: process (fallback)" in text and "TOOL_CONSOLE_SANDBOX" in text
    # Viewers read runs but cannot run or cancel.
    seen = text_of(viewer_client.get(reverse("run", args=[run.pk])).content.decode())
    assert "sandbox: process (fallback)" in seen
    assert "Run again with these inputs" not in seen and "Cancel" not in seen
