"""What /metrics says (docs/operations.md, "Metrics"). No HTTP here: the view is
tools_app/views/metrics.py.

Run, queue, worker and OAuth figures are aggregated from the database when scraped (a few
queries, however many tools and runs), so they are right across hosts, gunicorn workers
and Celery pool processes, and a run pays nothing for them. The result is kept in the
default cache for settings.METRICS_CACHE_SECONDS so that many scrapers cost one
computation. Request latency is measured in each web process: prometheus_client's
multiprocess mode adds up the processes when PROMETHEUS_MULTIPROC_DIR is set (gunicorn
sets it, console/gunicorn.conf.py); without it (tests, runserver) this process's own."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db.models import Count, Min, Q, Sum
from django.utils import timezone
from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from tools_app.models import AuditEvent, Run, WorkerHeartbeat
from tools_app.models.runs import FINISHED, RunStatus

logger = logging.getLogger("tools_app.metrics")

CACHE_KEY = "tool_console:metrics:db"
# Run durations, in seconds (a tool's default timeout is 60 s, the longest allowed 3600).
RUN_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0)
HTTP_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
# What tools_app/integrations/oauth.py records when a refresh fails.
OAUTH_REFRESH_FAILED = "integration.oauth_refresh_failed"

# This process's registry, for request latency when there is no multiprocess folder.
LOCAL = CollectorRegistry(auto_describe=True)
HTTP_DURATION = Histogram(
    "tool_console_http_request_duration_seconds",
    "Time from a request reaching Django to its response, by method, view and status class.",
    ("method", "view", "status"),
    buckets=HTTP_BUCKETS,
    registry=LOCAL,
)
HTTP_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


def observe_request(method: str, view: str, status: int, seconds: float) -> None:
    """One request's latency; every label has few values (a method outside the standard
    ones is "other", the view is a URL name or "other", the status its class). A count
    that cannot be kept (an unwritable multiprocess folder) is logged, never the request's
    failure: the page was served."""
    try:
        HTTP_DURATION.labels(
            method if method in HTTP_METHODS else "other", view, f"{status // 100}xx"
        ).observe(seconds)
    except Exception as exc:
        logger.warning("request latency not counted: %s: %s", type(exc).__name__, exc)


def multiprocess_dir() -> str:
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR", "")


def render() -> bytes:
    """The exposition text: the database's figures and the request latency."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(DatabaseCollector())
    if multiprocess_dir():
        MultiProcessCollector(registry)
    else:
        registry.register(_Local())
    return generate_latest(registry)


class _Local(Collector):
    def collect(self) -> Iterator[Metric]:
        yield from LOCAL.collect()


def snapshot() -> dict[str, Any]:
    """The database's figures as plain data, cached for METRICS_CACHE_SECONDS."""
    seconds = float(settings.METRICS_CACHE_SECONDS)
    if seconds > 0:
        found = cache.get(CACHE_KEY)
        if found is not None:
            return found
    data = _query()
    if seconds > 0:
        cache.set(CACHE_KEY, data, seconds)
    return data


def _query() -> dict[str, Any]:
    """Six queries, whatever the number of tools, runs and workers."""
    finished = list(
        Run.objects.filter(status__in=FINISHED)
        .values_list("tool__name", "status", "via")
        .annotate(n=Count("id"))
        .order_by()
    )
    buckets = {f"le{i}": Count("id", filter=Q(duration__lte=b)) for i, b in enumerate(RUN_BUCKETS)}
    durations = list(
        Run.objects.filter(status__in=FINISHED, duration__isnull=False)
        .values("status")
        .annotate(n=Count("id"), total=Sum("duration"), **buckets)
        .order_by()
    )
    active = {
        row["status"]: row
        for row in Run.objects.filter(status__in=(RunStatus.QUEUED, RunStatus.RUNNING))
        .values("status")
        .annotate(n=Count("id"), oldest=Min("created_at"))
        .order_by()
    }
    starts = dict(
        Run.objects.filter(started_at__isnull=False)
        .values_list("spare")
        .annotate(n=Count("id"))
        .order_by()
    )
    workers = WorkerHeartbeat.objects.alive().aggregate(n=Count("id"), slots=Sum("concurrency"))
    refresh_failures = AuditEvent.objects.filter(action=OAUTH_REFRESH_FAILED).count()
    now = timezone.now()
    queued = active.get(RunStatus.QUEUED, {})
    oldest = queued.get("oldest")
    return {
        "finished": [[tool, status, via, n] for tool, status, via, n in finished],
        "durations": [
            {
                "status": row["status"],
                "count": row["n"],
                "sum": row["total"] or 0.0,
                "buckets": [row[f"le{i}"] for i in range(len(RUN_BUCKETS))],
            }
            for row in durations
        ],
        "queued": queued.get("n", 0),
        "running": active.get(RunStatus.RUNNING, {}).get("n", 0),
        "oldest_queued_age": (now - oldest).total_seconds() if oldest else 0.0,
        "starts": {"spare": starts.get(True, 0), "cold": starts.get(False, 0)},
        "workers": workers["n"] or 0,
        "worker_slots": workers["slots"] or 0,
        "oauth_refresh_failures": refresh_failures,
        "at": time.time(),
    }


class DatabaseCollector(Collector):
    """The run, queue, worker and OAuth metrics, from snapshot()."""

    def collect(self) -> Iterator[Metric]:
        data = snapshot()
        runs = CounterMetricFamily(
            "tool_console_runs",
            "Finished runs by tool, final status and how they were started.",
            labels=("tool", "status", "via"),
        )
        for tool, status, via, n in data["finished"]:
            runs.add_metric((tool, status, via), n)
        yield runs

        durations = HistogramMetricFamily(
            "tool_console_run_duration_seconds",
            "How long finished runs' tool processes ran, by final status.",
            labels=("status",),
        )
        for row in data["durations"]:
            cumulative = [(_le(b), n) for b, n in zip(RUN_BUCKETS, row["buckets"], strict=True)]
            durations.add_metric(
                (row["status"],), [*cumulative, ("+Inf", row["count"])], row["sum"]
            )
        yield durations

        yield _gauge("tool_console_runs_queued", "Runs waiting for a worker.", data["queued"])
        yield _gauge("tool_console_runs_running", "Runs a worker is running.", data["running"])
        yield _gauge(
            "tool_console_oldest_queued_age_seconds",
            "How long the oldest queued run has waited (0 when none waits).",
            data["oldest_queued_age"],
        )
        yield _gauge(
            "tool_console_workers_alive",
            "Celery workers whose heartbeat is recent (tools_app/ops/heartbeat.py).",
            data["workers"],
        )
        yield _gauge(
            "tool_console_worker_slots",
            "Runs the alive workers can run at once (their concurrency, added up).",
            data["worker_slots"],
        )
        starts = CounterMetricFamily(
            "tool_console_run_starts",
            "Runs started in a spare sandbox prepared beforehand, or cold.",
            labels=("start",),
        )
        for kind in ("spare", "cold"):
            starts.add_metric((kind,), data["starts"][kind])
        yield starts
        yield CounterMetricFamily(
            "tool_console_oauth_refresh_failures",
            "Failed OAuth token refreshes (the audit log's integration.oauth_refresh_failed).",
            value=data["oauth_refresh_failures"],
        )
        yield _gauge(
            "tool_console_metrics_computed_timestamp_seconds",
            "When these database figures were computed (they are cached briefly).",
            data["at"],
        )


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, value=value)


def _le(bound: float) -> str:
    return repr(float(bound))
