"""Runs with known outcomes, durations, queue waits and ages, for the analytics tests."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta

from django.utils import timezone

from tools_app.models import Run, ToolVersion
from tools_app.models.runs import RunStatus, RunVia


def add_runs(
    version: ToolVersion,
    count: int = 1,
    *,
    status: str = RunStatus.SUCCEEDED,
    durations: list[float] | None = None,
    waits: list[float | None] | None = None,
    age: timedelta = timedelta(hours=1),
    now: datetime | None = None,
) -> list[Run]:
    """`count` runs (or one per duration) of `version` queued `age` before `now`, each
    started `wait` seconds after it was queued (None: never started)."""
    now = now or timezone.now()
    if durations is not None:
        count = len(durations)
    queued = now - age
    rows = []
    for i in range(count):
        wait = waits[i] if waits is not None else 0.5
        rows.append(
            Run(
                tool_id=version.tool_id,
                version=version,
                status=status,
                via=RunVia.API,
                duration=durations[i] if durations is not None else None,
                started_at=None if wait is None else queued + timedelta(seconds=wait),
                finished_at=now if status in (RunStatus.SUCCEEDED, RunStatus.FAILED) else None,
            )
        )
    runs = Run.objects.bulk_create(rows)
    # created_at is auto_now_add: set afterwards, one UPDATE for them all.
    by_time = defaultdict(list)
    for run in runs:
        by_time[queued].append(run.pk)
    for moment, pks in by_time.items():
        Run.objects.filter(pk__in=pks).update(created_at=moment)
    return runs
