"""Cancelling a run: a queued one at once, a running one by asking its worker to stop."""

from __future__ import annotations

from django.utils import timezone

from tools_app.audit import Actor, record
from tools_app.models import Run
from tools_app.models.runs import RunStatus
from tools_app.runs import replay
from tools_app.runs.setup import error_result


def cancel_run(run: Run, actor: Actor) -> bool:
    """Cancel a queued run at once; ask the worker to stop a running one (it polls the
    flag every CANCEL_POLL_SECONDS, then the tool gets its grace period). Returns whether
    anything changed; `run` is refreshed."""
    now = timezone.now()
    message = f"Cancelled by {actor.label} before it started."
    changed = bool(
        Run.objects.filter(pk=run.pk, status=RunStatus.QUEUED).update(
            status=RunStatus.CANCELLED,
            cancel_requested=True,
            sealed_params="",
            result=error_result(message),
            finished_at=now,
        )
    )
    if changed:
        replay.refresh_for_run(run.pk)  # a case's run: its check is told
    else:
        changed = bool(
            Run.objects.filter(pk=run.pk, status=RunStatus.RUNNING, cancel_requested=False).update(
                cancel_requested=True
            )
        )
    if changed:
        record(actor, "run.cancel", run, summary=f"cancelled a run of {run.tool.name}")
    run.refresh_from_db()
    return changed
