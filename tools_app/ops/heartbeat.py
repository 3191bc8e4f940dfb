"""Worker heartbeats: each Celery worker process writes a WorkerHeartbeat row every
WORKER_HEARTBEAT_SECONDS from a thread of its own, so the web can tell, whatever the
broker, whether any worker will pick a queued run up (tools_app/ops/health.py reads them).

console/celery.py starts a Beater as a worker bootstep; a worker that stops cleanly
deletes its row, one that dies leaves a row that simply grows old."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Iterator

from django.conf import settings
from django.db import DatabaseError, IntegrityError, connections
from django.utils import timezone

logger = logging.getLogger("tools_app.heartbeat")

# The worker's pool forks replacement processes from the main process, where this thread
# runs. A fork while the thread is inside the database driver could hand the child a held
# lock of the driver's, so forks wait for the beat in progress.
_fork_guard = threading.Lock()


def _reset_guard_in_child() -> None:
    global _fork_guard
    _fork_guard = threading.Lock()


os.register_at_fork(
    before=lambda: _fork_guard.acquire(),
    after_in_parent=lambda: _fork_guard.release(),
    after_in_child=_reset_guard_in_child,
)


@contextlib.contextmanager
def holding_forks() -> Iterator[None]:
    """For another thread of the worker's main process that uses the database."""
    with _fork_guard:
        yield


class Beater:
    def __init__(self, name: str, queues: str = "", concurrency: int = 0) -> None:
        self.name = name[:200]
        self.pid = os.getpid()
        self.queues = queues[:500]
        self.concurrency = concurrency
        self.started_at = timezone.now()
        self.stopping = threading.Event()
        self.thread: threading.Thread | None = None
        self.failing = False
        self.isolation = ""
        self.cpu_limit = ""

    def start(self) -> None:
        self.thread = threading.Thread(target=self._loop, name="worker-heartbeat", daemon=True)
        self.thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self.stopping.set()
        if self.thread is not None:
            self.thread.join(timeout)

    def _loop(self) -> None:
        from tools_app.runner import cgroups, isolation_level
        from tools_app.runner.limits import format_cpus

        self.isolation = isolation_level()[0]
        reason = cgroups.probe_cpu()
        self.cpu_limit = (
            f"none: {reason}" if reason else f"{format_cpus(settings.RUNNER_CPUS)} per run"
        )
        try:
            while True:
                with _fork_guard:
                    self.beat()
                if self.stopping.wait(float(settings.WORKER_HEARTBEAT_SECONDS)):
                    break
            with _fork_guard:
                self.forget()
        finally:
            with _fork_guard:
                connections.close_all()  # this thread's connections

    def beat(self) -> None:
        from tools_app.models import WorkerHeartbeat

        now = timezone.now()
        try:
            mine = WorkerHeartbeat.objects.filter(name=self.name, pid=self.pid)
            if not mine.update(seen_at=now):
                try:
                    WorkerHeartbeat.objects.create(
                        name=self.name,
                        pid=self.pid,
                        queues=self.queues,
                        concurrency=self.concurrency,
                        isolation=self.isolation,
                        cpu_limit=self.cpu_limit[:200],
                        started_at=self.started_at,
                        seen_at=now,
                    )
                except IntegrityError:
                    mine.update(seen_at=now)
        except DatabaseError:
            # A locked or not yet migrated database must not stop the worker; say it once.
            if not self.failing:
                logger.warning("could not write the worker heartbeat", exc_info=True)
            self.failing = True
            connections.close_all()
        else:
            self.failing = False

    def forget(self) -> None:
        from tools_app.models import WorkerHeartbeat

        try:
            WorkerHeartbeat.objects.filter(name=self.name, pid=self.pid).delete()
        except DatabaseError:
            logger.warning("could not remove the worker heartbeat", exc_info=True)
