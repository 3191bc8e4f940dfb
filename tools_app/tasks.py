"""Celery tasks: thin wrappers, the work is in tools_app.runs (start.py, execute.py, reaper.py).

Results are ignored (the Run row is the record). Acknowledged before they run
(CELERY_TASK_ACKS_LATE = False) and claimed with a conditional UPDATE, so a tool never runs
twice; a run whose worker died is reaped as `lost` instead of being retried."""

from __future__ import annotations

import logging
import time

from celery import shared_task

from tools_app.analytics import rollup
from tools_app.integrations import ledger
from tools_app.integrations.oauth import refresh_due
from tools_app.runs import execute, reaper, start

logger = logging.getLogger("tools_app.tasks")


@shared_task(name=start.EXECUTE_RUN_TASK, ignore_result=True)
def execute_run(run_id: str) -> None:
    # Two lines a run, with its run id and request id (console/celery.py binds them), so
    # `grep <run id>` on the worker's log finds when and where it ran.
    started = time.monotonic()
    logger.info("run %s received", run_id)
    execute.execute_run(run_id, reload=False)
    logger.info("run %s done in %.0f ms", run_id, (time.monotonic() - started) * 1000)


@shared_task(name="tools_app.tasks.reap_lost_runs", ignore_result=True)
def reap_lost_runs() -> int:
    reaper.prune_worker_heartbeats()
    return reaper.reap_lost_runs()


@shared_task(name="tools_app.tasks.refresh_oauth_tokens", ignore_result=True)
def refresh_oauth_tokens() -> int:
    """Refresh the OAuth integrations whose access token is due (the beat runs it)."""
    return len(refresh_due())


@shared_task(name="tools_app.tasks.prune_secret_ledger", ignore_result=True)
def prune_secret_ledger() -> int:
    """Delete secret-usage ledger rows past CONSOLE_LEDGER_RETENTION_DAYS (the beat runs it)."""
    return ledger.prune()


@shared_task(name="tools_app.tasks.roll_up_runs", ignore_result=True)
def roll_up_runs() -> int:
    """Roll the closed hours of every tool's runs up for the Analytics tab (the beat runs
    it; tools_app/analytics/rollup.py)."""
    return rollup.roll_up()
