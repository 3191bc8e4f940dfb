"""A check's page: per case pass/fail, messages, expected beside actual with the diff,
polling while it runs, "Accept the new output", the publish status and the admin's override.

The first tests read checks stored as the replay stores them; those marked `worker`
replay real cases on a real Celery worker."""

from __future__ import annotations

import uuid

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.support.case_pages import FAILING, PASSING, add_version, greet_tool
from tests.support.forms import submit
from tools_app.audit import Actor
from tools_app.models import AuditEvent, CaseCheck, CaseRun, ToolVersion
from tools_app.models.cases import CaseOutcome, CheckStatus
from tools_app.models.runs import RunVia
from tools_app.runs import replay, start

FAILED_CHECK = {
    "kind": "text",
    "verdict": "failed",
    "message": "the text differs",
    "expected": "hi Bob",
    "actual": "hello Bob",
    "diff": "--- expected\n+++ actual\n-hi Bob\n+hello Bob\n",
    "line": 5,
}


@pytest.fixture
def failed_check(db, developer):
    """A finished check of draft v2 (FAILING) that asked to publish, by the developer."""
    tool = greet_tool(cases=PASSING)
    version = add_version(tool, cases=FAILING)
    check = CaseCheck.objects.create(
        tool=tool, version=version, user=developer, via=RunVia.BROWSER,
        status=CheckStatus.FAILED, total=1, failed=1, publish_requested=True,
    )  # fmt: skip
    CaseRun.objects.create(
        case_check=check, position=0, name="greets_bob", outcome=CaseOutcome.FAILED,
        checks=[FAILED_CHECK],
    )  # fmt: skip
    return check


def test_it_shows_expected_beside_actual_and_the_diff(developer_client, failed_check):
    response = developer_client.get(f"/checks/{failed_check.pk}/")
    page = response.content.decode()
    assert response.status_code == 200
    assert "greets_bob" in page and "the text differs" in page
    assert '<pre tabindex="0" class="expected">hi Bob</pre>' in page
    assert '<pre tabindex="0" class="actual">hello Bob</pre>' in page
    assert "+hello Bob" in page and "cases.yaml line 5" in page
    assert "Blocked: version 2 was not published, because 1 case failed" in page
    assert "hx-get" not in page  # finished: nothing to poll


def test_it_keeps_the_output_to_the_checks_starter_and_admins(viewer_client, failed_check):
    page = viewer_client.get(f"/checks/{failed_check.pk}/").content.decode()
    assert "greets_bob" in page and "Failed" in page
    assert "hello Bob" not in page and "Only the person who started this check" in page
    assert "Accept the new output" not in page


def test_it_polls_while_running_and_stops_once_finished(developer_client, developer, failed_check):
    CaseCheck.objects.filter(pk=failed_check.pk).update(status=CheckStatus.RUNNING)
    # A pending case whose run is still queued: refresh() settles nothing, the page polls.
    queued = start.start_run(
        failed_check.version, {"who": "Bob"}, actor=Actor(user=developer), via=RunVia.BROWSER,
        enqueue=False,
    )  # fmt: skip
    CaseRun.objects.filter(case_check=failed_check).update(
        outcome=CaseOutcome.PENDING, checks=[], run=queued
    )
    running = developer_client.get(f"/checks/{failed_check.pk}/live/", HTTP_HX_REQUEST="true")
    assert running.status_code == 200
    assert f'hx-get="/checks/{failed_check.pk}/live/"' in running.content.decode()
    assert running["Cache-Control"] == "no-store"
    CaseCheck.objects.filter(pk=failed_check.pk).update(status=CheckStatus.PASSED)
    done = developer_client.get(f"/checks/{failed_check.pk}/live/", HTTP_HX_REQUEST="true")
    assert "hx-get" not in done.content.decode()
    assert '<div id="check-live"' in done.content.decode()


def test_developers_get_no_override(developer_client, failed_check):
    page = developer_client.get(f"/checks/{failed_check.pk}/").content.decode()
    assert "Publish with failing cases" not in page
    response = developer_client.post(f"/checks/{failed_check.pk}/override/", {"reason": "ship"})
    assert response.status_code == 403


def test_an_admin_overrides_with_a_reason(console_admin_client, failed_check):
    page = console_admin_client.get(f"/checks/{failed_check.pk}/").content.decode()
    assert "Publish with failing cases" in page
    empty = console_admin_client.post(f"/checks/{failed_check.pk}/override/", {"reason": "  "})
    assert empty.status_code == 400 and "Say why" in empty.content.decode()
    assert not ToolVersion.objects.get(pk=failed_check.version_id).published_with_failing_cases

    response = submit(
        console_admin_client, f"/checks/{failed_check.pk}/", {"reason": "Bob asked for hi"},
        form_id="override-form",
    )  # fmt: skip
    assert response.status_code == 302
    version = ToolVersion.objects.get(pk=failed_check.version_id)
    assert version.published_with_failing_cases
    assert version.tool.published_version_id == version.pk
    event = AuditEvent.objects.get(action="tool.publish_override")
    assert "Bob asked for hi" in str(event.summary) + str(event.data)
    tool_page = console_admin_client.get("/tools/greet/").content.decode()
    assert "published with failing cases" in tool_page and "Bob asked for hi" in tool_page
    versions = console_admin_client.get("/tools/greet/versions/").content.decode()
    assert "published with failing cases" in versions


def test_viewers_get_403_on_posts_and_bad_ids_404(viewer_client, failed_check):
    assert (
        viewer_client.post(f"/checks/{failed_check.pk}/override/", {"reason": "x"}).status_code
        == 403
    )
    assert viewer_client.post(f"/checks/{failed_check.pk}/cases/0/accept/").status_code == 403
    assert viewer_client.get(f"/checks/{uuid.uuid4()}/").status_code == 404
    assert viewer_client.get("/checks/not-a-uuid/").status_code == 404
    assert viewer_client.get(f"/checks/{uuid.uuid4()}/live/").status_code == 404


def test_accepting_a_case_that_is_not_there_is_a_404(developer_client, failed_check):
    response = developer_client.post(f"/checks/{failed_check.pk}/cases/7/accept/", {"base": "2"})
    assert response.status_code == 404


# --- With a real worker --------------------------------------------------------------


@pytest.mark.worker
def test_it_runs_all_cases_and_shows_them_passed(worker, developer_client, developer):
    greet_tool(cases=PASSING)
    response = submit(developer_client, "/tools/greet/versions/1/cases/", button="Run all cases")
    assert response.status_code == 302 and response["Location"].startswith("/checks/")
    check = CaseCheck.objects.get()
    assert check.user == developer and check.via == RunVia.BROWSER
    check = replay.wait(check, 60)
    assert check.status == CheckStatus.PASSED, replay.check_json(check)
    page = developer_client.get(response["Location"]).content.decode()
    assert '<span class="badge passed" id="check-status">Passed</span>' in page
    assert "1 passed" in page
    tab = developer_client.get("/tools/greet/versions/1/cases/").content.decode()
    assert '<span class="badge passed">Passed</span>' in tab


@pytest.mark.worker
def test_it_accepts_the_new_output_as_a_new_draft(worker, developer_client):
    tool = greet_tool(cases=FAILING)
    submit(developer_client, "/tools/greet/versions/1/cases/", button="Run all cases")
    check = replay.wait(CaseCheck.objects.get(), 60)
    assert check.status == CheckStatus.FAILED, replay.check_json(check)
    page = developer_client.get(f"/checks/{check.pk}/").content.decode()
    assert "hi Bob" in page and "hello Bob" in page

    response = submit(developer_client, f"/checks/{check.pk}/", button="Accept the new output")
    assert response.status_code == 302
    tool.refresh_from_db()
    assert tool.latest_number == 2
    cases = ToolVersion.objects.get(tool=tool, number=2).file_bytes()["cases.yaml"].decode()
    assert "hello Bob" in cases
    shown = developer_client.get(response["Location"]).content.decode()
    assert "saved as draft version 2 of greet" in shown
    assert 'href="/tools/greet/versions/2/cases/"' in shown

    # The accepted version passes.
    submit(developer_client, "/tools/greet/versions/2/cases/", button="Run all cases")
    again = replay.wait(CaseCheck.objects.filter(version__number=2).get(), 60)
    assert again.status == CheckStatus.PASSED, replay.check_json(again)


def test_its_query_count_does_not_grow_with_the_number_of_cases(
    developer_client, failed_check, django_assert_max_num_queries
):
    url = f"/checks/{failed_check.pk}/"
    developer_client.get(url)  # warm up once-per-process work (sessions, parsed cases)
    with CaptureQueriesContext(connection) as one:
        assert developer_client.get(url).status_code == 200

    CaseRun.objects.bulk_create(
        CaseRun(
            case_check=failed_check,
            position=n,
            name=f"case_{n}",
            outcome=CaseOutcome.FAILED,
            checks=[FAILED_CHECK],
        )  # fmt: skip
        for n in range(1, 40)
    )
    with django_assert_max_num_queries(len(one)):
        response = developer_client.get(url)
    assert response.status_code == 200 and "case_39" in response.content.decode()
