"""Replaying a version's cases (tools_app/runs/replay.py): through a real worker, the check
completes with no page open; cases that cannot start, cases.yaml's own problems, and the
JSON the API and `test_tools` read."""

from __future__ import annotations

import time

import pytest

from tests.support.cases import CASES, GREET_TS, greet_files, rewrite, run_in_process, save
from tests.support.worker import wait_for_run
from tools_app.audit import Actor
from tools_app.cases.propose import propose
from tools_app.catalog import case_secrets
from tools_app.models import AuditEvent, CaseCheck, Run
from tools_app.models.cases import CaseOutcome, CheckStatus
from tools_app.models.runs import FINISHED, RunStatus, RunVia
from tools_app.runs import execute, replay
from tools_app.runs import start as run_start


@pytest.fixture(autouse=True)
def fresh_parse_cache():
    # Row ids repeat across tests (rolled back): parsed cases must not outlive one.
    replay._PARSED.clear()


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_it_replays_a_case_saved_from_a_run_green_on_a_worker(worker, developer):
    version = save(greet_files(cases=None), publish=True)
    actor = Actor(user=developer)
    run = run_start.start_run(
        version, {"name": "Ada", "key": "k-secret"}, actor=actor, via=RunVia.BROWSER
    )
    run = wait_for_run(run.pk, FINISHED, worker=worker)
    assert run.status == RunStatus.SUCCEEDED, run.result

    saved = replay.save_case_from_run(
        run,
        name="greets_ada",
        description="Ada with her key",
        expect=propose(replay.outcome_of(run)),
        sealed_values={"key": "k-secret"},
        actor=actor,
    )
    assert saved.created and saved.version.number == 2 and saved.version.is_draft
    text = saved.version.files["cases.yaml"]
    assert "k-secret" not in text and "greets_ada" in text

    check = replay.start_check(saved.version, actor=actor, via=RunVia.BROWSER)
    assert check.status == CheckStatus.RUNNING and check.total == 1
    # The worker evaluates the case when its run finishes: nobody calls refresh here.
    deadline = time.monotonic() + 60
    while CaseCheck.objects.get(pk=check.pk).status == CheckStatus.RUNNING:
        assert time.monotonic() < deadline, worker.log()
        time.sleep(0.05)
    check = CaseCheck.objects.get(pk=check.pk)
    assert check.status == CheckStatus.PASSED, replay.check_json(check)
    assert (check.passed, check.failed, check.errored) == (1, 0, 0)
    case_run = check.case_runs.get()
    # The sealed key reached the run (the text says so), masked in its record.
    assert "with a key" in str(case_run.run.result)
    assert case_run.run.params["key"] == run_start.MASK
    assert AuditEvent.objects.filter(action="cases.check").exists()


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_it_replays_cases_in_parallel_on_the_worker(worker, developer):
    version = save(greet_files())
    check = replay.start_check(version, actor=Actor(user=developer), via=RunVia.API)
    check = replay.wait(check, 60)
    assert check.status == CheckStatus.PASSED, replay.check_json(check)
    assert check.total == check.passed == 2
    assert check.finished_at is not None


@pytest.mark.django_db
def test_it_replays_in_process_and_reports_a_failure(developer):
    broken = GREET_TS.replace("hello ", "bye ")
    version = save(greet_files(source=broken))
    check = replay.start_check(
        version, actor=Actor(user=developer), via=RunVia.COMMAND, enqueue=False
    )
    check = run_in_process(check)
    assert check.status == CheckStatus.FAILED
    data = replay.check_json(check)
    assert [c["outcome"] for c in data["cases"]] == ["failed", "failed"]
    failed = [c for c in data["cases"][0]["checks"] if c["verdict"] == "failed"]
    assert failed and failed[0]["kind"] == "contains" and failed[0]["actual"].startswith("bye")


@pytest.mark.django_db
def test_it_is_idempotent(developer):
    version = save(greet_files())
    check = replay.start_check(version, actor=Actor(user=developer), via=RunVia.API, enqueue=False)
    check = run_in_process(check)
    before = list(check.case_runs.values_list("outcome", "checks"))
    again = replay.refresh(CaseCheck.objects.get(pk=check.pk))
    assert again.status == check.status == CheckStatus.PASSED
    assert list(again.case_runs.values_list("outcome", "checks")) == before


@pytest.mark.django_db
def test_it_runs_only_the_cases_named(developer):
    version = save(greet_files())
    check = replay.start_check(
        version, actor=Actor(user=developer), via=RunVia.API, names=["greets_bob"], enqueue=False
    )
    assert list(check.case_runs.values_list("name", flat=True)) == ["greets_bob"]
    with pytest.raises(replay.UnknownCases) as caught:
        replay.start_check(version, actor=Actor(user=developer), via=RunVia.API, names=["nope"])
    assert caught.value.names == ["nope"]


@pytest.mark.django_db
def test_a_version_without_cases_is_empty(developer):
    version = save(greet_files(cases=None))
    check = replay.start_check(version, actor=Actor(user=developer), via=RunVia.API)
    assert check.status == CheckStatus.EMPTY and check.total == 0
    assert not Run.objects.exists()


@pytest.mark.django_db
def test_a_case_whose_inputs_do_not_fit_is_an_error_not_a_run(developer):
    version = save(greet_files())
    # A later TOOL.md could drop `name`; here the case simply lacks the required input.
    version = rewrite(version, "cases:\n  - name: nobody\n    expect:\n      - is_error: false\n")
    check = replay.start_check(version, actor=Actor(user=developer), via=RunVia.API)
    assert check.status == CheckStatus.ERROR
    case_run = check.case_runs.get()
    assert case_run.outcome == CaseOutcome.ERROR and case_run.run is None
    assert "name" in case_run.message and "do not fit" in case_run.message


@pytest.mark.django_db
def test_a_sealed_input_from_another_console_is_an_error_naming_it(developer, settings):
    version = save(greet_files(cases=None))
    token = case_secrets.seal({"key": "k-secret"}, tool="greet", user=developer)["key"]
    cases = (
        "cases:\n  - name: keyed\n    inputs: {name: Ada}\n"
        f"    sealed: {{key: {token}}}\n    expect:\n      - is_error: false\n"
    )
    version = save(greet_files(cases=cases))
    # Another console: other keys.
    from cryptography.fernet import Fernet

    from tools_app.integrations import vault

    settings.CONSOLE_ENCRYPTION_KEYS = [Fernet.generate_key().decode()]
    vault.clear_cache()
    check = replay.start_check(version, actor=Actor(user=developer), via=RunVia.API)
    case_run = check.case_runs.get()
    assert check.status == CheckStatus.ERROR and case_run.outcome == CaseOutcome.ERROR
    assert "sealed input key" in case_run.message and "another console" in case_run.message
    assert "k-secret" not in case_run.message


@pytest.mark.django_db
def test_cases_yaml_problems_are_an_error_entry_with_file_and_line(developer):
    version = save(greet_files())
    bad = CASES + "  - name: greets_ada\n    inputs: {name: X}\n    expect: [{is_error: false}]\n"
    version = rewrite(version, bad)
    check = replay.start_check(version, actor=Actor(user=developer), via=RunVia.API, enqueue=False)
    problems = check.case_runs.get(name=replay.PROBLEMS_NAME)
    assert problems.outcome == CaseOutcome.ERROR
    assert "greet/cases.yaml:" in problems.message


@pytest.mark.django_db
def test_accepting_the_new_output_makes_a_passing_draft(developer):
    broken = GREET_TS.replace("hello ", "bye ")
    version = save(greet_files(source=broken))
    actor = Actor(user=developer)
    check = run_in_process(
        replay.start_check(version, actor=actor, via=RunVia.BROWSER, enqueue=False)
    )
    assert check.status == CheckStatus.FAILED
    saved = replay.accept_output(check.case_runs.get(name="greets_bob"), actor=actor)
    assert saved.version.number == version.number + 1
    check = run_in_process(
        replay.start_check(saved.version, actor=actor, via=RunVia.BROWSER, enqueue=False)
    )
    outcomes = dict(check.case_runs.values_list("name", "outcome"))
    assert outcomes == {"greets_ada": CaseOutcome.FAILED, "greets_bob": CaseOutcome.PASSED}


@pytest.mark.django_db
def test_saving_a_case_refuses_a_duplicate_name_and_unknown_sealed_inputs(developer):
    version = save(greet_files(), publish=True)
    actor = Actor(user=developer)
    run = run_start.start_run(version, {"name": "Ada"}, actor=actor, via=RunVia.BROWSER)
    execute.execute_run(run.pk)
    run.refresh_from_db()
    with pytest.raises(ValueError):
        replay.save_case_from_run(
            run, name="greets_ada", description="", expect=[{"is_error": False}],
            sealed_values={}, actor=actor,
        )  # fmt: skip
    with pytest.raises(ValueError, match="name"):
        replay.save_case_from_run(
            run, name="other", description="", expect=[{"is_error": False}],
            sealed_values={"name": "x"}, actor=actor,
        )  # fmt: skip


@pytest.mark.django_db
def test_check_json_reads_a_bounded_number_of_queries(developer, django_assert_max_num_queries):
    many = "cases:\n" + "".join(
        f"  - name: c{i}\n    inputs: {{name: N{i}}}\n    expect: [{{is_error: false}}]\n"
        for i in range(30)
    )
    version = save(greet_files(cases=many))
    check = replay.start_check(version, actor=Actor(user=developer), via=RunVia.API, enqueue=False)
    fresh = CaseCheck.objects.get(pk=check.pk)
    with django_assert_max_num_queries(2):
        data = replay.check_json(fresh)
    assert len(data["cases"]) == 30 and data["status"] == "running"
