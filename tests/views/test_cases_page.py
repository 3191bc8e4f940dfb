"""The Cases tab of a version: its cases (sealed inputs masked), their expectations and
latest results, "Run all cases", the notice of a version without cases, roles."""

from __future__ import annotations

import pytest

from tests.support.case_pages import FAILING, PASSING, add_version, greet_tool
from tools_app.models import CaseCheck, CaseRun
from tools_app.models.cases import CaseOutcome, CheckStatus
from tools_app.models.runs import RunVia

SEALED = """cases:
  - name: keyed
    inputs: {who: Ann}
    sealed: {api_key: "gAAAAABnot-a-real-token"}
    expect:
      - contains: hello
"""


@pytest.fixture
def greet(db):
    return greet_tool(cases=PASSING)


def test_it_lists_the_cases_with_their_expectations(viewer_client, greet):
    response = viewer_client.get("/tools/greet/versions/1/cases/")
    page = response.content.decode()
    assert response.status_code == 200
    assert "greets_ann" in page and "Ann is greeted" in page
    assert "text: hello Ann" in page and "is_error: false" in page
    assert "not run" in page  # no check yet


def test_it_is_a_tab_of_the_tool_page(viewer_client, greet):
    page = viewer_client.get("/tools/greet/").content.decode()
    assert 'href="/tools/greet/versions/1/cases/"' in page
    tab = viewer_client.get("/tools/greet/versions/1/cases/").content.decode()
    assert 'href="/tools/greet/versions/1/cases/" aria-current="page">Cases</a>' in tab
    assert "1 case" in tab


def test_it_masks_sealed_inputs(viewer_client, db):
    greet_tool(cases=SEALED)
    page = viewer_client.get("/tools/greet/versions/1/cases/").content.decode()
    assert "keyed" in page and "••••••" in page
    assert "gAAAAABnot-a-real-token" not in page


def test_it_says_when_a_version_has_no_cases(developer_client, db):
    greet_tool(cases=None)
    page = developer_client.get("/tools/greet/versions/1/cases/").content.decode()
    assert "This version has no cases" in page
    assert "Save as a case" in page and "/docs/cases/" in page
    assert "Run all cases" not in page
    assert "no cases" in developer_client.get("/tools/greet/").content.decode()


def test_it_shows_the_latest_checks_result_per_case(viewer_client, greet):
    version = greet.published_version
    check = CaseCheck.objects.create(
        tool=greet, version=version, via=RunVia.BROWSER, status=CheckStatus.FAILED, total=1,
        failed=1,
    )  # fmt: skip
    CaseRun.objects.create(
        case_check=check, position=0, name="greets_ann", outcome=CaseOutcome.FAILED
    )
    page = viewer_client.get("/tools/greet/versions/1/cases/").content.decode()
    assert f'href="/checks/{check.pk}/#case-0"' in page
    assert '<span class="badge failed">Failed</span>' in page


def test_it_shows_each_versions_own_cases(viewer_client, greet):
    add_version(greet, cases=FAILING)
    assert "greets_bob" in viewer_client.get("/tools/greet/versions/2/cases/").content.decode()
    first = viewer_client.get("/tools/greet/versions/1/cases/").content.decode()
    assert "greets_ann" in first and "greets_bob" not in first


def test_it_shows_problems_of_a_broken_cases_file(viewer_client, greet):
    from tests.support import tool_files
    from tools_app.models import ToolVersion
    from tools_app.models.tools import encode_files

    # Stored under looser rules (saving refuses it now): the page still shows what it can.
    files = tool_files("greet") | {"cases.yaml": b"cases:\n  - name: Bad Name\n"}
    ToolVersion.objects.filter(tool=greet, number=1).update(
        files=encode_files(files), sha256="0" * 64
    )
    response = viewer_client.get("/tools/greet/versions/1/cases/")
    assert response.status_code == 200
    assert "cases.yaml has problems" in response.content.decode()


def test_viewers_may_not_run_the_cases(viewer_client, greet):
    page = viewer_client.get("/tools/greet/versions/1/cases/").content.decode()
    assert "Run all cases" not in page
    assert viewer_client.post("/tools/greet/versions/1/cases/").status_code == 403
    assert not CaseCheck.objects.exists()


@pytest.mark.parametrize(
    "path",
    [
        "/tools/greet/versions/9/cases/",
        "/tools/greet/versions/0/cases/",
        "/tools/greet/versions/99999999999/cases/",
        "/tools/nope/versions/1/cases/",
        "/tools/..%2f/versions/1/cases/",
    ],
)
def test_it_404s_unknown_tools_and_versions(viewer_client, greet, path):
    assert viewer_client.get(path).status_code == 404
