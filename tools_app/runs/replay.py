"""Replaying a version's cases (cases.yaml, docs/cases.md). No HTTP here.

start_check() starts one run per case through runs.start.start_run, so a case runs with the
same runner, sandbox and secret policy as any run the person (or token) starts, queued on
Celery: the worker pool bounds how many run at once. Each finished run is evaluated with
tools_app.cases.evaluate by refresh(), which the worker calls after every run it finishes
(runs/execute.py), so a check completes with no page open; the page, the API and
`test_tools` all read checks through check_json().

The publish gate (runs/gate.py) starts checks with publish=True: refresh() publishes the
version when every case passed. It lives here, not in gate.py, because gate.py starts
checks through this module and the two must not import each other."""

from __future__ import annotations

import logging
import mimetypes
import time
from collections.abc import Collection, Mapping
from typing import Any

from django.db import transaction
from django.db.models import Count, Q
from django.urls import reverse
from django.utils import timezone

from tools_app.audit import Actor, record
from tools_app.cases.document import CASES_FILE, Case, CasesResult, cases_of
from tools_app.cases.evaluate import Outcome, evaluate
from tools_app.cases.propose import accepted
from tools_app.cases.write import add_case, replace_case
from tools_app.catalog import case_secrets
from tools_app.catalog.versions import InvalidTool, SaveResult, publish_version, save_version
from tools_app.lib import strictyaml
from tools_app.manifest import input_files
from tools_app.models import CaseCheck, CaseRun, Run, ToolVersion
from tools_app.models.cases import CaseOutcome, CheckStatus
from tools_app.models.runs import FINISHED
from tools_app.runs import start
from tools_app.runs.setup import manifest_of
from tools_app.signing.keyring import SigningKeyMissing

logger = logging.getLogger("tools_app.runs")

# wait(): how often the database is asked, first and at most (seconds).
WAIT_POLL_FIRST = 0.02
WAIT_POLL_MAX = 0.25
# The case run that reports what is wrong with cases.yaml itself.
PROBLEMS_NAME = CASES_FILE
# Parsed cases per version (versions never change), like runs.setup.manifest_of: a worker
# refreshes a check after each of its runs, and parsing 100 cases each time would cost more
# than the runs of a trivial tool.
_PARSED: dict[tuple[int, str], CasesResult] = {}
_PARSED_MAX = 64


class UnknownCases(ValueError):
    """Names asked for that the version's cases.yaml does not hold."""

    def __init__(self, names: list[str]) -> None:
        self.names = names
        super().__init__(f"no such case: {', '.join(names)}")


def cases_of_version(version: ToolVersion) -> CasesResult:
    key = (version.pk, version.sha256)
    parsed = _PARSED.get(key) if version.pk else None
    if parsed is None:
        parsed = cases_of(version.file_bytes(), manifest_of(version))
        if version.pk:
            if len(_PARSED) >= _PARSED_MAX:
                _PARSED.clear()
            _PARSED[key] = parsed
    return parsed


def has_cases(version: ToolVersion) -> bool:
    """Whether the version holds a cases.yaml (even one with problems: those block too)."""
    return CASES_FILE in version.files


def start_check(
    version: ToolVersion,
    *,
    actor: Actor,
    via: str,
    names: Collection[str] | None = None,
    publish: bool = False,
    enqueue: bool = True,
) -> CaseCheck:
    """Start replaying the version's cases (those in `names` when given: UnknownCases for
    a name it does not hold). A case that cannot start (its params do not fit the inputs,
    a sealed input cannot be opened) is an ERROR at once, with the reason; problems of
    cases.yaml itself are one more ERROR entry naming each file:line. No cases: EMPTY.
    enqueue=False: the runs are only stored queued (`test_tools` executes them itself)."""
    parsed = cases_of_version(version) if has_cases(version) else None
    cases = list(parsed.cases) if parsed is not None else []
    if names is not None:
        wanted = list(dict.fromkeys(names))
        unknown = [n for n in wanted if n not in {c.name for c in cases}]
        if unknown:
            raise UnknownCases(unknown)
        cases = [c for c in cases if c.name in wanted]
    # Errors only: a warning (an unusual but valid case) does not block anything.
    problems = [
        p
        for p in (parsed.problems if parsed is not None and names is None else ())
        if p.severity == strictyaml.ERROR
    ]
    with transaction.atomic():
        check = CaseCheck.objects.create(
            tool=version.tool,
            version=version,
            user=actor.user,
            token=actor.token,
            via=via,
            publish_requested=publish,
            total=len(cases) + (1 if problems else 0),
        )
        for position, case in enumerate(cases):
            _start_case(check, position, case, version, actor=actor, via=via, enqueue=enqueue)
        if problems:
            CaseRun.objects.create(
                case_check=check,
                position=len(cases),
                name=PROBLEMS_NAME,
                outcome=CaseOutcome.ERROR,
                message="\n".join(str(p) for p in problems),
            )
        record(
            actor,
            "cases.check",
            version.tool,
            f"{version.tool.name} v{version.number}: {len(cases)} case(s) replayed ({via})"
            + (", publish on pass" if publish else ""),
            {"version": version.number, "check": str(check.pk), "cases": len(cases)},
        )
    return refresh(check)


def _start_case(
    check: CaseCheck,
    position: int,
    case: Case,
    version: ToolVersion,
    *,
    actor: Actor,
    via: str,
    enqueue: bool,
) -> CaseRun:
    case_run = CaseRun(case_check=check, position=position, name=case.name)
    try:
        params = {
            **case.inputs,
            **case_secrets.open_inputs(case, version, user=actor.user, via=via),
        }
        # A savepoint: a run that fails to store leaves the check's transaction usable.
        with transaction.atomic():
            case_run.run = start.start_run(
                version,
                params,
                actor=actor,
                via=via,
                enqueue=enqueue,
                replay_sample=case.sample or "",
            )
    except case_secrets.SealedInputError as exc:
        case_run.outcome, case_run.message = CaseOutcome.ERROR, str(exc)
    except start.InvalidParams as exc:
        case_run.outcome = CaseOutcome.ERROR
        case_run.message = "the case's inputs do not fit the tool: " + "; ".join(exc.errors)
    case_run.save()
    return case_run


def outcome_of(run: Run) -> Outcome:
    artifacts = tuple(
        (a.name, mimetypes.guess_type(a.name)[0] or "application/octet-stream")
        for a in run.artifacts.all()
    )
    return Outcome(
        status=run.status,
        result=run.result,
        duration=run.duration,
        artifacts=artifacts,
        error=run.error,
    )


def _case_named(version: ToolVersion, name: str) -> Case | None:
    for case in cases_of_version(version).cases:
        if case.name == name:
            return case
    return None


def refresh(check: CaseCheck, *, news: bool = False) -> CaseCheck:
    """Evaluate the check's finished runs not evaluated yet, update its counts and status,
    and publish when every case passed and a publish was asked for. Idempotent: the check
    is locked while it is updated, so the worker finishing two runs at once and a page
    polling all agree. `news`: the caller knows a run of it ended (the worker), so the
    lock-free look for news is skipped."""
    if check.status != CheckStatus.RUNNING or not (news or _has_news(check)):
        return check
    with transaction.atomic():
        # The check's row only (PostgreSQL would lock the joined tool and version too),
        # with its version's hash: the parsed cases are kept per version and hash, so the
        # version's files are read only the first time.
        check = (
            CaseCheck.objects.select_for_update(of=("self",))
            .select_related("version")
            .only(*CHECK_FIELDS, "version__id", "version__sha256", "version__tool_id")
            .get(pk=check.pk)
        )
        if check.status != CheckStatus.RUNNING:
            return check
        ended = Q(run__isnull=True) | Q(run__status__in=FINISHED)
        pending = (
            check.case_runs.filter(ended, outcome=CaseOutcome.PENDING)
            .select_related("run")
            .prefetch_related("run__artifacts")
        )
        for case_run in pending:
            case = _case_named(check.version, case_run.name)
            if case_run.run is None:  # deleted: it can never finish
                case_run.outcome, case_run.message = CaseOutcome.ERROR, "its run was deleted"
            elif case is None:  # (cases.yaml is part of the version: it cannot change)
                case_run.outcome, case_run.message = CaseOutcome.ERROR, "the case is gone"
            else:
                result = evaluate(case, outcome_of(case_run.run))
                case_run.outcome = CaseOutcome(str(result.verdict))
                case_run.checks = [c.to_json() for c in result.checks]
            case_run.save(update_fields=["outcome", "checks", "message"])
        counts = check.case_runs.aggregate(
            total=Count("pk"),
            **{o: Count("pk", filter=Q(outcome=o)) for o in CaseOutcome.values},
        )
        check.passed = counts[CaseOutcome.PASSED]
        check.failed = counts[CaseOutcome.FAILED]
        check.errored = counts[CaseOutcome.ERROR]
        check.total = counts["total"]
        if counts[CaseOutcome.PENDING] == 0:
            check.status = _status(check)
            check.finished_at = timezone.now()
        check.save(update_fields=["passed", "failed", "errored", "total", "status", "finished_at"])
        if check.status == CheckStatus.PASSED and check.publish_requested and not check.published:
            _publish_passed(check)
    return check


CHECK_FIELDS = (
    "id", "tool_id", "version_id", "user_id", "token_id", "via", "status", "total", "passed",
    "failed", "errored", "publish_requested", "published", "override_reason", "override_by_id",
    "created_at", "finished_at",
)  # fmt: skip


def _has_news(check: CaseCheck) -> bool:
    """Whether refresh() has anything to do: a pending case whose run ended (or is gone),
    or none pending at all. One read, no lock: a page polling a long check, and wait(),
    take no write lock while nothing happens."""
    pending = CaseRun.objects.filter(case_check_id=check.pk, outcome=CaseOutcome.PENDING)
    statuses = list(pending.values_list("run__status", flat=True))
    return not statuses or any(s is None or s in FINISHED for s in statuses)


def _status(check: CaseCheck) -> CheckStatus:
    if check.total == 0:
        return CheckStatus.EMPTY
    if check.errored:
        return CheckStatus.ERROR
    if check.failed:
        return CheckStatus.FAILED
    return CheckStatus.PASSED


def _publish_passed(check: CaseCheck) -> None:
    """Every case passed: publish, as the person (or token) who asked for it."""
    actor = Actor(user=check.user, token=check.token)
    try:
        publish_version(check.version, actor=actor)
    except (InvalidTool, SigningKeyMissing) as exc:
        # An http tool checked again at publish (its allow list changed since it was saved),
        # or no signing key (docs/signing.md).
        logger.warning(
            "check %s passed but %s cannot be published: %s", check.pk, check.version, exc
        )
        return
    check.published = True
    check.save(update_fields=["published"])


def refresh_for_run(run_id) -> CaseCheck | None:
    """After a run finished (the worker, the reaper, a cancel): refresh the check it is a
    case of, if any; one query when it is none. Never raises: the run's own end matters
    more, and the next refresh (a page, wait()) catches up."""
    check_id = CaseRun.objects.filter(run_id=run_id).values_list("case_check_id", flat=True).first()
    return None if check_id is None else refresh_check(check_id)


def refresh_check(check_id) -> CaseCheck | None:
    """refresh() the check `check_id`, never raising (see refresh_for_run)."""
    try:
        check = CaseCheck.objects.filter(pk=check_id).only("id", "status").first()
        return refresh(check, news=True) if check is not None else None
    except Exception:
        logger.exception("check %s could not be refreshed", check_id)
        return None


def wait(check: CaseCheck, timeout: float) -> CaseCheck:
    """Refresh until the check finished or `timeout` seconds passed."""
    deadline = time.monotonic() + max(0.0, timeout)
    pause = WAIT_POLL_FIRST
    check = refresh(check)
    while check.status == CheckStatus.RUNNING and time.monotonic() < deadline:
        time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
        pause = min(pause * 1.5, WAIT_POLL_MAX)
        check = refresh(check)
    return check


def check_url(check: CaseCheck) -> str:
    return reverse("api:check", kwargs={"check_id": str(check.pk)})


def check_json(check: CaseCheck) -> dict[str, Any]:
    """The check as the API and `test_tools --json` give it, with each case's checks.
    Two queries (the check with its tool and version, then its cases)."""
    if not _loaded(check):
        check = (
            CaseCheck.objects.select_related("tool", "version")
            .defer("version__files", "version__toolmd", "version__manifest")
            .get(pk=check.pk)
        )
    cases = []
    for case_run in check.case_runs.order_by("position"):
        cases.append(
            {
                "position": case_run.position,
                "name": case_run.name,
                "outcome": case_run.outcome,
                "run": str(case_run.run_id) if case_run.run_id else None,
                "message": case_run.message,
                "checks": case_run.checks,
            }
        )
    return {
        "id": str(check.pk),
        "tool": check.tool.name,
        "version": check.version.number,
        "status": check.status,
        "url": check_url(check),
        "total": check.total,
        "passed": check.passed,
        "failed": check.failed,
        "errored": check.errored,
        "publish_requested": check.publish_requested,
        "published": check.published,
        "override_reason": check.override_reason,
        "created_at": check.created_at.isoformat(),
        "finished_at": check.finished_at.isoformat() if check.finished_at else None,
        "cases": cases,
    }


def _loaded(check: CaseCheck) -> bool:
    state = check._state.fields_cache
    return "tool" in state and "version" in state


# --- Saving cases ------------------------------------------------------------------------


class CaseError(ValueError):
    """The case cannot be saved as asked; the message is safe to show."""


def save_case_from_run(
    run: Run,
    *,
    name: str,
    description: str,
    expect: list[dict],
    sealed_values: Mapping[str, Any],
    actor: Actor,
    base: int | None = None,
) -> SaveResult:
    """A new version: the tool's latest files with a case made of `run`'s inputs added to
    cases.yaml. The run's masked (sensitive) inputs are not in its record: the person
    enters them again as `sealed_values`, which are sealed (catalog/case_secrets.py).
    Raises CaseError (duplicate name, an unknown sensitive input), InvalidTool (the new
    cases.yaml is invalid) or VersionConflict (someone saved after `base`)."""
    manifest = manifest_of(run.version)
    inputs = {}
    for input_name, value in (run.params or {}).items():
        spec = manifest.inputs.get(input_name)
        if spec is None or spec.sensitive or value == start.MASK:
            continue
        if spec.type in input_files.FILE_TYPES:
            continue  # the record keeps a file's name and size, not its bytes
        inputs[input_name] = value
    unknown = [n for n in sealed_values if not _is_sensitive(manifest, n)]
    if unknown:
        raise CaseError(f"not sensitive inputs of {run.tool.name}: {', '.join(sorted(unknown))}")
    case: dict[str, Any] = {"name": name}
    if description:
        case["description"] = description
    if inputs:
        case["inputs"] = inputs
    if sealed_values:
        sealed = case_secrets.seal(sealed_values, tool=run.tool.name, user=actor.user)
        case["sealed"] = sealed
    if run.replay_sample:
        case["sample"] = run.replay_sample
    case["expect"] = list(expect)
    latest = run.tool.versions.order_by("-number").first()
    files = latest.file_bytes()
    text = files.get(CASES_FILE, b"").decode("utf-8") or None
    try:
        new_text = add_case(text, case)
    except ValueError as exc:
        raise CaseError(str(exc)) from None
    return save_version(
        run.tool.name,
        {**files, CASES_FILE: new_text.encode("utf-8")},
        actor=actor,
        note=f"case {name} saved from run {run.pk}",
        base=latest.number if base is None else base,
    )


def _is_sensitive(manifest, name: str) -> bool:
    spec = manifest.inputs.get(name)
    return spec is not None and spec.sensitive


def accept_output(case_run: CaseRun, *, actor: Actor, base: int | None = None) -> SaveResult:
    """A new version whose case `case_run` expects what its run gave (cases.propose.accepted):
    the tool's latest files, that case's expectations replaced, its kinds kept."""
    check = case_run.case_check
    case = _case_named(check.version, case_run.name)
    if case is None or case_run.run is None or not case_run.run.is_finished:
        raise CaseError("this case has no finished run to accept the output of")
    new_case = {**case.to_yaml(), "expect": accepted(case, outcome_of(case_run.run))}
    tool = check.tool
    latest = tool.versions.order_by("-number").first()
    files = latest.file_bytes()
    try:
        new_text = replace_case(files.get(CASES_FILE, b"").decode("utf-8"), case.name, new_case)
    except KeyError:
        raise CaseError(
            f"version {latest.number} has no case {case.name} any more; nothing to update"
        ) from None
    return save_version(
        tool.name,
        {**files, CASES_FILE: new_text.encode("utf-8")},
        actor=actor,
        note=f"case {case.name}: accepted the output of run {case_run.run_id}",
        base=latest.number if base is None else base,
    )
