"""Reaping runs no worker will finish: running runs whose heartbeat stopped turn `lost`,
queued runs no worker claimed within RUN_QUEUED_TIMEOUT_SECONDS are sent again, then turn
`lost`; and forgetting workers not seen for a day. The periodic task calls reap_lost_runs();
pages and the API call reap_if_stale() on a run they show."""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.db import DatabaseError
from django.utils import timezone

from tools_app.audit import Actor, record
from tools_app.integrations import ledger, vault
from tools_app.models import Run
from tools_app.models.runs import RunStatus
from tools_app.ops import logcontext
from tools_app.runs import replay, start
from tools_app.runs.setup import error_result

logger = logging.getLogger("tools_app.runs")


def _lost_cutoff():
    return timezone.now() - timedelta(seconds=settings.RUN_LOST_AFTER_SECONDS)


def reap_lost_runs(run_ids: list | None = None) -> int:
    """What the periodic reaper does: running runs whose worker died turn `lost`, queued
    runs no worker claimed are sent again, then turn `lost` (reap_unclaimed_runs).
    Returns how many runs turned lost."""
    return reap_dead_runs(run_ids) + reap_unclaimed_runs(run_ids)


def reap_dead_runs(run_ids: list | None = None) -> int:
    """Mark running runs whose heartbeat is older than RUN_LOST_AFTER_SECONDS as lost:
    their worker died. Returns how many."""
    cutoff = _lost_cutoff()
    candidates = Run.objects.stale(cutoff)
    if run_ids is not None:
        candidates = candidates.filter(pk__in=run_ids)
    reaped = 0
    fields = ("pk", "tool__name", "worker", "request_id")
    for run in candidates.select_related("tool").only(*fields):
        message = (
            "The worker running this tool stopped answering (no heartbeat for "
            f"{settings.RUN_LOST_AFTER_SECONDS} s); the run is lost. Its side effects, if "
            "any, are unknown: check before running it again."
        )
        # Conditional again: a heartbeat may have arrived since the SELECT.
        if (
            Run.objects.stale(cutoff)
            .filter(pk=run.pk)
            .update(
                status=RunStatus.LOST,
                error=message,
                result=error_result(message),
                finished_at=timezone.now(),
            )
        ):
            reaped += 1
            with logcontext.bound(request=run.request_id, run=str(run.pk)):
                logger.warning("run %s lost its worker %s", run.pk, run.worker or "(unknown)")
            # Rows exist once the worker read secrets; its real ending, if it comes, wins.
            try:
                ledger.record_outcome_of_runs([run.pk], RunStatus.LOST)
            except (DatabaseError, vault.VaultError):
                logger.exception("could not record run %s as lost in the ledger", run.pk)
            record(
                Actor.system(),
                "run.lost",
                run,
                summary=f"a run of {run.tool.name} lost its worker ({run.worker or 'unknown'})",
            )
            replay.refresh_for_run(run.pk)  # a case's run: its check is told
    return reaped


def _queued_cutoff():
    return timezone.now() - timedelta(seconds=settings.RUN_QUEUED_TIMEOUT_SECONDS)


def _duration(seconds: float) -> str:
    if seconds >= 120 and seconds % 60 == 0:
        return f"{int(seconds // 60)} minutes"
    return f"{seconds:g} s"


def reap_unclaimed_runs(run_ids: list | None = None) -> int:
    """A queued run no worker claimed within RUN_QUEUED_TIMEOUT_SECONDS is sent again once
    (its message may have been lost; a run is claimed once however often it is delivered);
    still unclaimed a timeout later, it is marked lost with what to check. Returns how many
    turned lost."""
    cutoff = _queued_cutoff()
    candidates = Run.objects.unclaimed(cutoff)
    if run_ids is not None:
        candidates = candidates.filter(pk__in=run_ids)
    timeout = _duration(settings.RUN_QUEUED_TIMEOUT_SECONDS)
    lost = 0
    fields = ("pk", "resent_at", "request_id", "tool__name")
    for run in candidates.select_related("tool").only(*fields):
        if run.resent_at is None:
            # Conditional: one reaper re-sends it, and only if still unclaimed.
            if Run.objects.filter(
                pk=run.pk, status=RunStatus.QUEUED, resent_at__isnull=True
            ).update(resent_at=timezone.now()):
                # The run's own ids, so the resend is in its story (and in the message).
                with logcontext.bound(request=run.request_id, run=str(run.pk)):
                    logger.warning(
                        "run %s not picked up within %s; sending it again", run.pk, timeout
                    )
                    record(
                        Actor.system(),
                        "run.resend",
                        run,
                        summary=f"a run of {run.tool.name} waited {timeout} for a worker; "
                        "sent again",
                    )
                    start.enqueue_run(run.pk)  # by module: tests patch start.enqueue_run
            continue
        message = (
            f"No worker picked this run up within {timeout}, nor within {timeout} after it "
            "was sent again; is a worker running? An admin can check on the System page "
            "(/system/). The tool did not run: start it again once a worker is up."
        )
        if Run.objects.filter(pk=run.pk, status=RunStatus.QUEUED, resent_at__lt=cutoff).update(
            status=RunStatus.LOST,
            error=message,
            result=error_result(message),
            sealed_params="",
            finished_at=timezone.now(),
        ):
            lost += 1
            record(
                Actor.system(),
                "run.lost",
                run,
                summary=f"a run of {run.tool.name} was never picked up by a worker",
            )
            replay.refresh_for_run(run.pk)
    return lost


def prune_worker_heartbeats() -> int:
    """Forget workers not seen for a day (a killed worker cannot remove its own row)."""
    from tools_app.models import WorkerHeartbeat

    cutoff = timezone.now() - timedelta(days=1)
    return WorkerHeartbeat.objects.filter(seen_at__lt=cutoff).delete()[0]


def reap_if_stale(run: Run) -> Run:
    """Pages and the API call this on a run they show: even with no worker left to run the
    periodic reaper, a dead run turns `lost` when someone looks at it."""
    if run.status == RunStatus.RUNNING:
        beat = run.heartbeat_at or run.started_at
        if beat is not None and beat < _lost_cutoff() and reap_dead_runs([run.pk]):
            run.refresh_from_db()
    elif run.status == RunStatus.QUEUED:
        # Likewise a queued run past its timeout is re-sent, then lost, when looked at.
        waited_since = run.resent_at or run.created_at
        if waited_since < _queued_cutoff():
            reap_unclaimed_runs([run.pk])
            run.refresh_from_db()
    return run
