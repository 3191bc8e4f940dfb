"""`manage.py test_tools` (docs/commands.md "test_tools"): exit 0 when every case passes,
1 when any fails, 2 on bad usage; one line per case; a JUnit XML report. In this process by
default (like run_tool), on the worker with --worker."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from tests.support.cases import GREET_TS, greet_files, save
from tools_app.models import CaseCheck, Run
from tools_app.models.cases import CheckStatus
from tools_app.models.runs import RunStatus, RunVia
from tools_app.runs import replay

BROKEN_TS = GREET_TS.replace("hello ", "bye ")


@pytest.fixture(autouse=True)
def fresh_parse_cache():
    replay._PARSED.clear()


def run_command(*args: str) -> tuple[int, str, str]:
    out, err = StringIO(), StringIO()
    try:
        call_command("test_tools", *args, stdout=out, stderr=err)
    except CommandError as exc:
        return exc.returncode, out.getvalue(), err.getvalue() + str(exc)
    return 0, out.getvalue(), err.getvalue()


@pytest.mark.django_db
def test_it_exits_0_when_every_case_passes_and_prints_a_line_per_case():
    save(greet_files(), publish=True)
    code, out, _err = run_command("greet")
    assert code == 0, out
    assert "PASS greet v1 greets_ada" in out and "PASS greet v1 greets_bob" in out
    assert "2 of 2 case(s) passed in 1 tool(s)" in out
    check = CaseCheck.objects.get()
    assert check.via == RunVia.COMMAND and check.status == CheckStatus.PASSED


@pytest.mark.django_db
def test_it_exits_1_on_a_failing_case_and_tests_the_latest_version_by_default(tmp_path):
    save(greet_files(), publish=True)
    save(greet_files(source=BROKEN_TS))  # v2, a draft
    report = tmp_path / "report.xml"
    code, out, err = run_command("--junit", str(report))
    assert code == 1, out
    assert "FAIL greet v2 greets_ada: the text does not contain" in out
    assert "cases failed in greet" in err

    suite = ET.parse(report).getroot().find("testsuite")  # noqa: S314 (our own report)
    assert suite.get("name") == "greet v2" and suite.get("tests") == "2"
    assert suite.get("failures") == "2" and suite.get("errors") == "0"
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == ["greets_ada", "greets_bob"]
    failure = cases[0].find("failure")
    assert failure is not None and "bye Ada" in failure.text

    code, out, _ = run_command("greet", "--version", "1")
    assert code == 0 and "PASS greet v1 greets_ada" in out


@pytest.mark.django_db
def test_it_reports_a_case_that_cannot_start_as_an_error_in_junit(tmp_path):
    from tests.support.cases import rewrite

    version = save(greet_files(), publish=True)
    rewrite(version, "cases:\n  - name: nobody\n    expect: [{is_error: false}]\n")
    report = tmp_path / "report.xml"
    code, out, _ = run_command("greet", "--junit", str(report))
    assert code == 1 and "ERROR greet v1 nobody: the case's inputs do not fit" in out
    suite = ET.parse(report).getroot().find("testsuite")  # noqa: S314 (our own report)
    assert suite.get("errors") == "1" and suite.find("testcase/error") is not None


@pytest.mark.django_db
def test_tools_without_cases_pass_and_say_so():
    save(greet_files(cases=None), publish=True)
    assert run_command("greet")[:2] == (
        0,
        "greet v1: no cases\n0 of 0 case(s) passed in 1 tool(s)\n",
    )
    assert run_command() == (0, "no tool has cases\n", "")


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nope"], "no tool is named 'nope'"),
        (["../x"], "no tool is named '../x'"),
        (["greet", "--version", "7"], "greet has no version 7"),
        (["--version", "1"], "--version takes exactly one tool NAME"),
        (["greet", "--version", "0"], "--version must be 1.."),
        (["greet", "--timeout", "0"], "--timeout must be between"),
        (["greet", "--junit", "/no/such/folder/report.xml"], "--junit: no folder"),
    ],
)
def test_it_exits_2_on_bad_usage(args, message):
    save(greet_files(), publish=True)
    code, _out, err = run_command(*args)
    assert code == 2 and message in err
    assert not Run.objects.exists()


@pytest.mark.django_db
def test_out_of_time_it_stops_the_runs_left_and_exits_1(monkeypatch):
    save(greet_files(), publish=True)
    from tools_app.runs import local

    # No run gets executed before the deadline: nothing stays queued.
    monkeypatch.setattr(local.execute, "execute_run", lambda run_id, **kw: None)
    code, out, err = run_command("greet", "--timeout", "0.2")
    assert code == 1
    assert not Run.objects.filter(status=RunStatus.QUEUED).exists()
    assert Run.objects.filter(status=RunStatus.CANCELLED).count() == 2
    assert "FAIL greet v1 greets_ada" in out


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_it_runs_the_cases_on_the_worker_with_worker(worker):
    save(greet_files(), publish=True)
    code, out, _ = run_command("greet", "--worker", "--timeout", "60")
    assert code == 0, out + worker.log()
    assert "PASS greet v1 greets_bob" in out
    assert set(Run.objects.values_list("worker", flat=True)) != {""}
