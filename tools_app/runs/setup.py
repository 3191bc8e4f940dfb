"""What both kinds of run are given before their tool starts: the limits, the work folder,
and the error that fails a run before then. Shared by tools_app/runs/execute.py (code tools)
and tools_app/http_tools/execute.py (http tools), which hands its runs back to runs: kept
apart from both so neither has to import the other for them."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings

from tools_app import runner
from tools_app.manifest.toolmd import Manifest
from tools_app.models import Run


class RunSetupError(Exception):
    """The console cannot start the tool (integration missing, secret unreadable...).
    The message is safe to show and store: it never holds a secret value."""


def limits_for(manifest: Manifest, timeout: float | None) -> runner.Limits:
    return runner.Limits(
        timeout=float(timeout if timeout is not None else manifest.timeout),
        memory_mb=settings.RUNNER_MEMORY_MB,
        max_processes=settings.RUNNER_MAX_PROCESSES,
        grace_seconds=settings.RUNNER_GRACE_SECONDS,
        disk_mb=settings.RUNNER_DISK_MB,
        cpus=settings.RUNNER_CPUS,
    )


def work_dir(run: Run) -> Path:
    return Path(settings.RUNS_WORK_PATH) / str(run.pk)
