"""Celery tasks: thin wrappers, the work is in tools_app.runs.

Results are ignored (the Run row is the record). Acknowledged before they run
(CELERY_TASK_ACKS_LATE = False) and claimed with a conditional UPDATE, so a tool never runs
twice; a run whose worker died is reaped as `lost` instead of being retried."""

from __future__ import annotations

from celery import shared_task

from tools_app import runs


@shared_task(name=runs.EXECUTE_RUN_TASK, ignore_result=True)
def execute_run(run_id: str) -> None:
    runs.execute_run(run_id, reload=False)


@shared_task(name="tools_app.tasks.reap_lost_runs", ignore_result=True)
def reap_lost_runs() -> int:
    runs.prune_worker_heartbeats()
    return runs.reap_lost_runs()
