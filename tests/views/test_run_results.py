"""How a finished run reads: the real reason it ended, one box for a cancelled run, the
raw result JSON with a copy button, API/MCP spelled as such, and agent tokens in the
run history's person filter."""

from __future__ import annotations

import html as html_lib
import json
import re

import pytest
from django.urls import reverse

from tests.views.test_run_pages import INPUTS, finished, make_run
from tools_app.models import AgentToken, Run
from tools_app.models.runs import RunStatus, RunVia

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fast_passwords(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def search(make_tool):
    return make_tool("search", language="python", inputs=INPUTS)


def page(client, run: Run) -> str:
    response = client.get(reverse("run", args=[run.pk]))
    assert response.status_code == 200
    return response.content.decode()


def test_it_says_why_a_run_that_exited_0_failed(viewer_client, search, developer):
    run = finished(
        search, developer, status=RunStatus.FAILED, exit_code=0,
        result={"content": [{"type": "text", "text": "bad query"}], "isError": True},
    )  # fmt: skip
    html = page(viewer_client, run)
    assert "Failed: the tool reported an error in its result (it exited with code 0)." in html
    assert ">Exit code 0" not in html


def test_it_says_the_exit_code_when_that_is_the_reason(viewer_client, search, developer):
    run = finished(search, developer, status=RunStatus.FAILED, exit_code=3, result=None)
    assert "Failed: the tool exited with code 3." in page(viewer_client, run)


def test_a_cancelled_run_shows_one_box(viewer_client, search, developer):
    run = finished(
        search, developer, status=RunStatus.CANCELLED, exit_code=None,
        result={"content": [{"type": "text", "text": "Cancelled: the run was cancelled."}],
                "isError": True},
    )  # fmt: skip
    html = page(viewer_client, run)
    shown = html.split('id="result-json"')[0]  # the raw JSON view repeats it, folded
    assert shown.count("the run was cancelled") == 1
    assert 'class="result is-error' not in html


def test_it_offers_the_raw_result_json_and_a_copy_button(developer_client, search, developer):
    html = page(developer_client, finished(search, developer))
    assert '<pre id="result-json" tabindex="0">' in html and "&quot;isError&quot;: false" in html
    assert 'data-copy="#result-json"' in html and "js/copy.js" in html


def test_it_spells_api_and_mcp_in_capitals(viewer_client, search):
    api = page(viewer_client, make_run(search, None, via=RunVia.API))
    assert "from API" in api and "from Api" not in api
    assert RunVia.MCP.label == "MCP"


def test_the_person_filter_includes_agent_tokens(viewer_client, search, developer):
    token, _ = AgentToken.issue("ci-bot", ["tools:run"])
    finished(search, developer)
    by_token = finished(search, None, via=RunVia.API, token=token)

    html = viewer_client.get(reverse("runs")).content.decode()
    assert 'value="token:ci-bot"' in html and "agent token “ci-bot”" in html
    response = viewer_client.get(reverse("runs"), {"person": "token:ci-bot"})
    assert [r.pk for r in response.context["page"]] == [by_token.pk]


def test_a_running_run_shows_its_elapsed_time_without_script(viewer_client, search, developer):
    from datetime import timedelta

    from django.utils import timezone

    started = timezone.now() - timedelta(seconds=42)
    run = make_run(search, developer, status=RunStatus.RUNNING, started_at=started,
                   heartbeat_at=timezone.now())  # fmt: skip
    html = page(viewer_client, run)
    assert "data-elapsed-since=" in html and "running for 42 s" in html


def test_it_resets_the_run_form_to_the_defaults(developer, developer_client, search):
    from tests.views.test_run_pages import form_url

    make_run(search, developer, params={"query": "last time", "limit": 3})
    html = developer_client.get(form_url(search)).content.decode()
    assert 'value="last time"' in html and 'id="reset-defaults"' in html
    [href] = re.findall(r'id="reset-defaults" href="([^"]+)"', html)

    reset = developer_client.get(form_url(search) + href.replace("&amp;", "&"))
    text = reset.content.decode()
    assert "last time" not in text and 'name="limit" value="10"' in text
    assert 'id="reset-defaults"' not in text


def test_it_shows_a_code_tools_structured_result_beside_its_text(
    developer_client, search, developer
):
    structured = {"total": 2, "names": ["a", "<b>"]}
    run = finished(
        search, developer, status=RunStatus.SUCCEEDED, exit_code=0,
        result={"content": [{"type": "text", "text": "a, <b>"}], "structuredContent": structured,
                "isError": False},
    )  # fmt: skip
    html = page(developer_client, run)
    shown = re.search(
        r'<pre class="structured" id="structured-result"[^>]*>(.*?)</pre>', html, re.S
    )
    assert shown is not None
    # As values: jsonb on PostgreSQL keeps keys in an order of its own.
    assert json.loads(html_lib.unescape(shown.group(1))) == structured
    assert "<b>" not in shown.group(1)


def test_it_shows_no_second_copy_of_an_http_tools_outputs(developer_client, search, developer):
    structured = {"total": 1, "id": "x"}  # jsonb reorders these keys
    text = '{\n  "total": 1,\n  "id": "x"\n}'
    run = finished(
        search, developer, status=RunStatus.SUCCEEDED, exit_code=0,
        result={"content": [{"type": "text", "text": text}], "structuredContent": structured,
                "isError": False},
    )  # fmt: skip
    assert 'id="structured-result"' not in page(developer_client, run)


def test_it_compares_a_deep_text_with_the_structured_result_safely(
    developer_client, search, developer
):
    deep = "[" * 100_000 + "]" * 100_000  # json.loads alone would raise RecursionError
    run = finished(
        search, developer, status=RunStatus.SUCCEEDED, exit_code=0,
        result={"content": [{"type": "text", "text": deep}], "structuredContent": {"a": 1},
                "isError": False},
    )  # fmt: skip
    assert 'id="structured-result"' in page(developer_client, run)
