"""Replaying a check's cases in this process, for commands (`test_tools`, `import_tools
--publish`): CI and GitOps need only the database, no worker or broker, like `run_tool`.
The runs are the ones replay.start_check(enqueue=False) stored; each is executed here, one
after another, and the check is refreshed (and so publishes on pass) as on a worker."""

from __future__ import annotations

import time

from tools_app.audit import Actor
from tools_app.models import CaseCheck, Run
from tools_app.models.cases import CaseOutcome
from tools_app.models.runs import RunStatus
from tools_app.runs import cancel, execute, replay

ACTIVE = (RunStatus.QUEUED, RunStatus.RUNNING)


def run_here(check: CaseCheck, timeout: float) -> CaseCheck:
    """Execute the check's queued runs in turn until done or `timeout` seconds pass; runs
    left over are cancelled (nothing would pick them up later). Returns the check as it
    ends: RUNNING only when time ran out."""
    deadline = time.monotonic() + timeout
    runs = check.case_runs.exclude(run=None).order_by("position")
    for run_id in runs.values_list("run_id", flat=True):
        if time.monotonic() >= deadline:
            break
        execute.execute_run(run_id, reload=False)
    return wait_or_give_up(check, max(0.0, deadline - time.monotonic()))


def wait_or_give_up(check: CaseCheck, timeout: float) -> CaseCheck:
    """Wait for the check; out of time, the runs not finished get a cancel request."""
    check = replay.wait(check, timeout)
    if check.is_finished:
        return check
    pending = check.case_runs.filter(outcome=CaseOutcome.PENDING).exclude(run=None)
    for run in Run.objects.filter(pk__in=pending.values("run_id"), status__in=ACTIVE):
        cancel.cancel_run(run, Actor.system())
    return check
