"""Every publish button goes through the publish gate: the version page's Publish, the
editor's "Save and publish" and the import's "publish". A version without cases is
published at once and says so; one with cases is published only when they pass. The tool
list shows each tool's last case result."""

from __future__ import annotations

import io
import zipfile

import pytest

from tests.support import tool_files
from tests.support.case_pages import FAILING, GREET_TS, INPUTS, PASSING, add_version, greet_tool
from tests.support.forms import submit
from tools_app.models import CaseCheck, Tool
from tools_app.models.cases import CheckStatus
from tools_app.models.runs import RunVia
from tools_app.runs import replay


def test_the_confirm_says_a_version_has_no_cases(console_admin_client, db):
    tool = greet_tool(cases=None)
    add_version(tool, cases=None)
    page = console_admin_client.get("/tools/greet/publish/2/").content.decode()
    assert "Version 2 has no cases: it is published at once, untested" in page


def test_the_confirm_counts_the_cases(console_admin_client, db):
    tool = greet_tool(cases=None)
    add_version(tool, cases=PASSING.replace("cases:\n", "cases:\n" + _case("other")))
    page = console_admin_client.get("/tools/greet/publish/2/").content.decode()
    assert "Version 2 has 2 cases: they run first" in page


def test_the_confirm_says_a_broken_cases_file_blocks(console_admin_client, db):
    from tools_app.models import ToolVersion
    from tools_app.models.tools import encode_files

    tool = greet_tool(cases=None)
    version = add_version(tool, cases=PASSING)
    files = version.file_bytes() | {"cases.yaml": b"cases:\n  - name: Bad Name\n"}
    # Stored under looser rules (saving refuses it now).
    ToolVersion.objects.filter(pk=version.pk).update(files=encode_files(files), sha256="1" * 64)
    page = console_admin_client.get("/tools/greet/publish/2/").content.decode()
    assert "The cases.yaml of version 2 has problems" in page
    assert "cases.yaml has problems" in console_admin_client.get("/tools/greet/").content.decode()


def _case(name: str) -> str:
    return f"  - name: {name}\n    inputs: {{who: Zed}}\n    expect:\n      - contains: Zed\n"


def test_a_version_without_cases_is_published_at_once(console_admin_client, db):
    tool = greet_tool(cases=None)
    add_version(tool, cases=None)
    response = submit(console_admin_client, "/tools/greet/publish/2/", button="Publish")
    tool.refresh_from_db()
    assert response.status_code == 302
    assert tool.published_version.number == 2
    page = console_admin_client.get(response["Location"]).content.decode()
    assert "Published version 2. This version has no cases" in page


def test_a_version_with_cases_goes_to_its_check(console_admin_client, db):
    tool = greet_tool(cases=None)
    add_version(tool, cases=PASSING)
    response = submit(console_admin_client, "/tools/greet/publish/2/", button="Publish")
    check = CaseCheck.objects.get()
    assert response["Location"] == f"/checks/{check.pk}/"
    assert check.publish_requested and check.version.number == 2
    tool.refresh_from_db()
    assert tool.published_version.number == 1  # not before its cases pass


def test_save_and_publish_in_the_editor_goes_through_the_gate(console_admin_client, db):
    tool = greet_tool(cases=None)
    add_version(tool, cases=None)
    submit_ = submit(
        console_admin_client, "/tools/greet/edit/", {"note": "again", "publish": "on"},
        button="Save version",
    )  # fmt: skip
    assert submit_.status_code == 302
    tool.refresh_from_db()
    assert tool.published_version.number == tool.latest_number
    shown = console_admin_client.get(submit_["Location"]).content.decode()
    assert "This version has no cases" in shown


def _zip(**tools: bytes | None) -> io.BytesIO:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, cases in tools.items():
            for path, data in tool_files(name, source=GREET_TS, inputs=INPUTS).items():
                archive.writestr(f"{name}/{path}", data)
            if cases is not None:
                archive.writestr(f"{name}/cases.yaml", cases)
    buffer.seek(0)
    buffer.name = "tools.zip"
    return buffer


def test_import_with_publish_lists_each_tools_check(console_admin_client, db):
    upload = _zip(plain=None, tested=PASSING.encode())
    response = console_admin_client.post("/tools/-/import/", {"file": upload, "publish": "on"})
    page = response.content.decode()
    assert response.status_code == 200
    assert Tool.objects.get(name="plain").published_version is not None
    assert "published untested" in page
    check = CaseCheck.objects.get(tool__name="tested")
    assert f'href="/checks/{check.pk}/"' in page
    assert Tool.objects.get(name="tested").published_version is None


def test_the_tool_list_shows_each_tools_last_case_result(
    viewer_client, db, django_assert_max_num_queries
):
    for name in ("one", "two", "three"):
        tool = greet_tool(cases=PASSING, name=name)
        for status in (CheckStatus.FAILED, CheckStatus.PASSED):
            CaseCheck.objects.create(
                tool=tool, version=tool.published_version, via=RunVia.BROWSER, status=status
            )
    greet_tool(cases=None, name="four")
    viewer_client.get("/tools/")  # warm the session and role caches
    with django_assert_max_num_queries(8):
        page = viewer_client.get("/tools/").content.decode()
    assert page.count('<span class="badge passed">passed</span>') == 3
    assert '<span class="badge failed">' not in page
    assert page.count("not checked") == 1


def test_the_tool_list_query_count_does_not_grow_with_tools(viewer_client, db):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def count() -> int:
        with CaptureQueriesContext(connection) as queries:
            viewer_client.get("/tools/")
        return len(queries)

    greet_tool(cases=PASSING, name="one")
    viewer_client.get("/tools/")
    few = count()
    for name in ("two", "three", "four", "five"):
        tool = greet_tool(cases=PASSING, name=name)
        CaseCheck.objects.create(tool=tool, version=tool.published_version, via=RunVia.BROWSER)
    assert count() == few


@pytest.mark.worker
def test_a_passing_version_is_published_by_its_check(worker, console_admin_client):
    tool = greet_tool(cases=None)
    add_version(tool, cases=PASSING)
    response = submit(console_admin_client, "/tools/greet/publish/2/", button="Publish")
    check = replay.wait(CaseCheck.objects.get(), 60)
    assert check.status == CheckStatus.PASSED, replay.check_json(check)
    tool.refresh_from_db()
    assert tool.published_version.number == 2
    page = console_admin_client.get(response["Location"]).content.decode()
    assert "Published: agents get version 2" in page


@pytest.mark.worker
def test_a_failing_version_is_blocked(worker, console_admin_client):
    tool = greet_tool(cases=None)
    add_version(tool, cases=FAILING)
    response = submit(console_admin_client, "/tools/greet/publish/2/", button="Publish")
    check = replay.wait(CaseCheck.objects.get(), 60)
    assert check.status == CheckStatus.FAILED, replay.check_json(check)
    tool.refresh_from_db()
    assert tool.published_version.number == 1
    page = console_admin_client.get(response["Location"]).content.decode()
    assert "Blocked: version 2 was not published" in page
    assert "Publish with failing cases" in page
