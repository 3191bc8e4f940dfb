"""Celery tasks: thin wrappers, the work is in tools_app.runs (start.py, execute.py, reaper.py).

Results are ignored (the Run row is the record). Acknowledged before they run
(CELERY_TASK_ACKS_LATE = False) and claimed with a conditional UPDATE, so a tool never runs
twice; a run whose worker died is reaped as `lost` instead of being retried."""

from __future__ import annotations

from celery import shared_task

from tools_app.integrations.oauth import refresh_due
from tools_app.runs import execute, reaper, start


@shared_task(name=start.EXECUTE_RUN_TASK, ignore_result=True)
def execute_run(run_id: str) -> None:
    execute.execute_run(run_id, reload=False)


@shared_task(name="tools_app.tasks.reap_lost_runs", ignore_result=True)
def reap_lost_runs() -> int:
    reaper.prune_worker_heartbeats()
    return reaper.reap_lost_runs()


@shared_task(name="tools_app.tasks.refresh_oauth_tokens", ignore_result=True)
def refresh_oauth_tokens() -> int:
    """Refresh the OAuth integrations whose access token is due (the beat runs it)."""
    return len(refresh_due())
