"""Saving a finished run as a test case from its page: the proposed expectations, typed
YAML with line errors, sensitive inputs typed again and sealed, conflicts, roles."""

from __future__ import annotations

import uuid

import pytest

from tests.support.case_pages import add_version, finished_run, greet_tool
from tests.support.forms import submit
from tools_app.models import Run, ToolVersion
from tools_app.models.runs import RunStatus

SECRET = "tell-no-one-4f1c"


@pytest.fixture
def greet(db):
    return greet_tool()


@pytest.fixture
def run(greet, developer):
    return finished_run(greet.published_version, developer, {"who": "Ann"})


def _cases_yaml(tool) -> str:
    tool.refresh_from_db()
    latest = ToolVersion.objects.get(tool=tool, number=tool.latest_number)
    return latest.file_bytes()["cases.yaml"].decode()


def test_it_offers_save_as_a_case_on_a_finished_run(developer_client, run):
    page = developer_client.get(f"/runs/{run.pk}/").content.decode()
    assert f'href="/runs/{run.pk}/case/"' in page and "Save as a case" in page


def test_it_offers_no_save_as_a_case_to_viewers_or_on_an_active_run(
    viewer_client, developer_client, greet, developer, run
):
    assert "Save as a case" not in viewer_client.get(f"/runs/{run.pk}/").content.decode()
    Run.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING, finished_at=None)
    assert "Save as a case" not in developer_client.get(f"/runs/{run.pk}/").content.decode()
    assert developer_client.get(f"/runs/{run.pk}/case/").status_code == 404


def test_it_proposes_expectations_from_the_result(developer_client, run):
    response = developer_client.get(f"/runs/{run.pk}/case/")
    page = response.content.decode()
    assert response.status_code == 200
    assert "is_error: false" in page
    assert "hello Ann" in page  # the text (or contains) expectation
    assert 'type="checkbox"' in page and "checked" in page


def test_it_saves_the_case_in_a_new_draft_version(developer_client, greet, run):
    response = submit(
        developer_client, f"/runs/{run.pk}/case/", {"name": "greets_ann"}, form_id="save-case-form"
    )
    greet.refresh_from_db()
    assert response.status_code == 302
    assert response["Location"] == f"/tools/greet/versions/{greet.latest_number}/cases/"
    assert greet.latest_number == 2 and greet.published_version.number == 1  # a draft
    text = _cases_yaml(greet)
    assert "greets_ann" in text and "hello Ann" in text
    page = developer_client.get(response["Location"]).content.decode()
    assert "Saved case greets_ann in draft version 2" in page and "greets_ann" in page


def test_it_saves_typed_expectations_beside_the_picked_ones(developer_client, greet, run):
    response = submit(
        developer_client,
        f"/runs/{run.pk}/case/",
        {"name": "typed", "proposed": None, "extra": '- contains: "hello"\n- regex: "A.n"\n'},
        form_id="save-case-form",
    )
    assert response.status_code == 302
    text = _cases_yaml(greet)
    assert "contains: hello" in text and "regex: A.n" in text and "is_error" not in text


def test_it_shows_yaml_problems_with_their_line_and_keeps_the_text(developer_client, greet, run):
    typed = '- contains: "hello"\n- regex: "(unclosed"\n'
    response = submit(
        developer_client,
        f"/runs/{run.pk}/case/",
        {"name": "bad_regex", "extra": typed},
        form_id="save-case-form",
    )
    page = response.content.decode()
    assert response.status_code == 400
    assert "line 2:" in page
    assert "(unclosed" in page  # nothing typed is lost
    assert greet.versions.count() == 1


@pytest.mark.parametrize(
    "typed",
    [
        "- [",
        "contains: x",
        "- nonsense_kind: 1",
        "- jmespath: 'length('\n  op: '>'\n  value: 1",
        "\x00\t- : :",
        "- schema: {type: 12}",
    ],
)
def test_it_never_fails_on_typed_yaml(developer_client, greet, run, typed):
    response = submit(
        developer_client, f"/runs/{run.pk}/case/", {"name": "odd", "extra": typed},
        form_id="save-case-form",
    )  # fmt: skip
    assert response.status_code in (302, 400)


def test_it_refuses_a_bad_or_duplicate_name(developer_client, greet, run):
    bad = submit(
        developer_client, f"/runs/{run.pk}/case/", {"name": "Bad Name"}, form_id="save-case-form"
    )
    assert bad.status_code == 400 and "lower-case letters" in bad.content.decode()
    assert (
        submit(
            developer_client, f"/runs/{run.pk}/case/", {"name": "first"}, form_id="save-case-form"
        ).status_code
        == 302
    )
    again = submit(
        developer_client, f"/runs/{run.pk}/case/", {"name": "first"}, form_id="save-case-form"
    )
    assert again.status_code == 400
    assert "already has a case named first" in again.content.decode()


def test_it_refuses_a_case_that_expects_nothing(developer_client, greet, run):
    response = submit(
        developer_client, f"/runs/{run.pk}/case/", {"name": "empty", "proposed": None},
        form_id="save-case-form",
    )  # fmt: skip
    assert response.status_code == 400
    assert "at least one expectation" in response.content.decode()


def test_it_seals_a_sensitive_input_typed_again(developer_client, greet, developer):
    run = finished_run(greet.published_version, developer, {"who": "Ann", "api_key": SECRET})
    form_page = developer_client.get(f"/runs/{run.pk}/case/").content.decode()
    assert 'type="password"' in form_page and SECRET not in form_page
    missing = submit(
        developer_client, f"/runs/{run.pk}/case/", {"name": "keyed"}, form_id="save-case-form"
    )
    assert missing.status_code == 400  # the run had a value: the case needs it too
    response = submit(
        developer_client,
        f"/runs/{run.pk}/case/",
        {"name": "keyed", "sealed__api_key": SECRET},
        form_id="save-case-form",
    )
    assert response.status_code == 302
    text = _cases_yaml(greet)
    assert SECRET not in text and "api_key" in text
    tab = developer_client.get(response["Location"]).content.decode()
    assert SECRET not in tab and "••••••" in tab


def test_it_reports_a_version_saved_meanwhile_and_keeps_the_form(developer_client, greet, run):
    page = f"/runs/{run.pk}/case/"
    developer_client.get(page)
    add_version(greet, cases=None)  # someone's save after the page was opened (base=1)
    response = developer_client.post(
        page, {"name": "late", "proposed": ["0"], "extra": "- contains: hello\n", "base": "1"}
    )
    text = response.content.decode()
    assert response.status_code == 400
    assert "version 2 of greet was saved" in text and "contains: hello" in text
    assert 'name="base" value="2"' in text  # the next press saves on top of it
    assert greet.versions.count() == 2


def test_it_keeps_other_peoples_runs_to_them(client, greet, developer, run):
    from tests.support import make_user
    from tools_app.roles import DEVELOPER

    client.force_login(make_user("other", DEVELOPER))
    assert client.get(f"/runs/{run.pk}/case/").status_code == 403


def test_viewers_get_403_and_bad_ids_404(viewer_client, developer_client, run):
    assert viewer_client.get(f"/runs/{run.pk}/case/").status_code == 403
    assert viewer_client.post(f"/runs/{run.pk}/case/", {"name": "x"}).status_code == 403
    assert developer_client.get(f"/runs/{uuid.uuid4()}/case/").status_code == 404
    assert developer_client.get("/runs/not-a-uuid/case/").status_code == 404
