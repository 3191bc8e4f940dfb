from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import models
from django.utils import timezone

# A worker is alive while its newest beat is younger than this many beats.
BEATS_BEFORE_DEAD = 3


def alive_after():
    """The oldest `seen_at` of a live worker."""
    return timezone.now() - timedelta(seconds=BEATS_BEFORE_DEAD * settings.WORKER_HEARTBEAT_SECONDS)


class WorkerHeartbeatQuerySet(models.QuerySet):
    def alive(self) -> WorkerHeartbeatQuerySet:
        return self.filter(seen_at__gte=alive_after())


class WorkerHeartbeat(models.Model):
    """One row per Celery worker process, beaten every WORKER_HEARTBEAT_SECONDS by a thread
    in the worker (console/celery.py), so the web can tell whether anyone will run a queued
    run whatever the broker."""

    name = models.CharField(max_length=200)  # Celery's node name, e.g. celery@host
    pid = models.PositiveIntegerField()
    queues = models.CharField(max_length=500, blank=True)
    concurrency = models.PositiveIntegerField(default=0)
    isolation = models.CharField(max_length=16, blank=True)
    # The CPU limit its runs get ("1 CPU per run"), or "none: <why>" (runner/cgroups.py).
    cpu_limit = models.CharField(max_length=200, blank=True)
    started_at = models.DateTimeField()
    seen_at = models.DateTimeField(db_index=True)

    objects = WorkerHeartbeatQuerySet.as_manager()

    class Meta:
        ordering = ["-seen_at"]
        constraints = [
            models.UniqueConstraint(fields=["name", "pid"], name="unique_worker_heartbeat")
        ]

    def __str__(self) -> str:
        return f"{self.name} (pid {self.pid})"
