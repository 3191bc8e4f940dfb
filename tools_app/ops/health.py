"""Is this console able to run tools? One answer for GET /api/v1/health, the System page
and the nav's warning dot. No HTTP here.

Ready means: the database answers, the broker answers, and at least one worker beat its
heartbeat recently (tools_app/ops/heartbeat.py). Isolation level, encryption keys and the queue
are reported but do not make the console unready."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import DatabaseError, connection
from django.db.models import Count, Max, Min
from django.utils import timezone

logger = logging.getLogger("tools_app.health")

# How long the broker may take to answer before it counts as unreachable.
BROKER_TIMEOUT = 2.0
# The checks that decide readiness (503 when one fails).
READINESS = ("database", "broker", "workers")


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str  # one line a person can act on
    data: dict[str, Any] = field(default_factory=dict)
    # Set when the check passes but an admin should act ("development key"): the word
    # the System page and the home page both show, in the warning colour.
    attention: str = ""

    @property
    def level(self) -> str:
        """ "problem", "warning" or "ok": one state for every page that shows the check."""
        if not self.ok:
            return "problem"
        return "warning" if self.attention else "ok"

    def as_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "detail": self.detail, **self.data}


@dataclass(frozen=True)
class Report:
    checks: tuple[Check, ...]

    @property
    def ready(self) -> bool:
        return all(check.ok for check in self.checks if check.name in READINESS)

    @property
    def problems(self) -> list[str]:
        return [check.detail for check in self.checks if not check.ok]

    def get(self, name: str) -> Check:
        return next(check for check in self.checks if check.name == name)

    def as_dict(self) -> dict[str, Any]:
        return {
            "ready": self.ready,
            **{check.name: check.as_dict() for check in self.checks},
            "problems": self.problems,
        }


def report() -> Report:
    db = database()
    return Report(
        (
            db,
            broker(),
            workers() if db.ok else _skipped("workers"),
            isolation(),
            encryption(),
            queue() if db.ok else _skipped("queue"),
        )
    )


def _skipped(name: str) -> Check:
    return Check(name, False, f"{name}: unknown, the database does not answer")


def database() -> Check:
    try:
        connection.ensure_connection()
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except DatabaseError as exc:
        return Check(
            "database",
            False,
            f"The database does not answer ({type(exc).__name__}); check DATABASE_URL.",
            {"vendor": connection.vendor},
        )
    return Check("database", True, "The database answers.", {"vendor": connection.vendor})


def broker() -> Check:
    """Connect to the broker and count the messages waiting on the default queue."""
    from console.celery import app
    from tools_app.ops import broker as embedded

    queue_name = app.conf.task_default_queue
    data: dict[str, Any] = {"queue": queue_name}
    try:
        with app.connection_for_write(connect_timeout=BROKER_TIMEOUT) as conn:
            conn.ensure_connection(max_retries=1, interval_start=0, timeout=BROKER_TIMEOUT)
            data["transport"] = conn.transport.driver_name
            channel = conn.default_channel
            if hasattr(channel, "_size"):  # kombu's virtual transports: Redis, filesystem
                data["pending"] = int(channel._size(queue_name))
            if isinstance(channel, embedded.Channel):
                data["embedded"] = True
                data["quarantined"] = len(embedded.quarantined(channel.quarantine_folder))
    except Exception as exc:  # any failure to reach it is the answer, never a 500
        logger.warning("health: the broker does not answer", exc_info=True)
        return Check(
            "broker",
            False,
            f"The task broker does not answer ({type(exc).__name__}); check "
            "CELERY_BROKER_URL and that it is reachable.",
            data,
        )
    detail = "The task broker answers."
    if data.get("quarantined"):
        detail += (
            f" {data['quarantined']} bad message file(s) were set aside in the broker's "
            "quarantine folder."
        )
    return Check("broker", True, detail, data)


def workers() -> Check:
    from tools_app.models import WorkerHeartbeat

    rows = WorkerHeartbeat.objects.aggregate(newest=Max("seen_at"))
    alive = list(WorkerHeartbeat.objects.alive().order_by("name", "pid"))
    newest_age = _age(rows["newest"])
    data = {
        "alive": len(alive),
        "newest_age": newest_age,
        "list": [
            {
                "name": w.name,
                "pid": w.pid,
                "queues": w.queues,
                "concurrency": w.concurrency,
                "isolation": w.isolation,
                "cpu_limit": w.cpu_limit,
                "started_at": w.started_at.isoformat(),
                "age": _age(w.seen_at),
            }
            for w in alive
        ],
    }
    if data["alive"]:
        plural = "s" if len(alive) != 1 else ""
        return Check("workers", True, f"{len(alive)} worker{plural} alive.", data)
    return Check("workers", False, no_worker_text(newest_age), data)


def no_worker_text(newest_age: float | None) -> str:
    seen = "none has ever reported" if newest_age is None else f"none seen for {int(newest_age)} s"
    return (
        f"No Celery worker is alive ({seen}): runs wait in the queue. Start one "
        "(`python3 dev.py up` does, or `celery -A console worker`)."
    )


def isolation() -> Check:
    from tools_app.runner import isolation_level

    level, reason = isolation_level()
    detail = (
        "Tools run in bubblewrap sandboxes."
        if level == "bwrap"
        else f"Tools run in the fallback sandbox: {reason}"
    )
    attention = "" if level == "bwrap" else "fallback sandbox"
    return Check("isolation", True, detail, {"level": level, "reason": reason}, attention)


def encryption() -> Check:
    from tools_app.integrations import vault

    development = vault.is_development_key()
    data: dict[str, Any] = {
        "development": development,
        "source": "development key file" if development else "CONSOLE_ENCRYPTION_KEYS",
    }
    try:
        ring = vault.keyring()
    except vault.KeyConfigurationError as exc:
        return Check("encryption", False, f"Encryption keys do not load: {exc}", data)
    data["keys"] = len(ring.key_ids)
    if development:
        detail = "Secrets use the generated development key; set CONSOLE_ENCRYPTION_KEYS."
    else:
        detail = f"{len(ring.key_ids)} key(s) in CONSOLE_ENCRYPTION_KEYS load."
    return Check("encryption", True, detail, data, "development key" if development else "")


def queue() -> Check:
    from tools_app.models import Run
    from tools_app.models.runs import RunStatus

    queued = Run.objects.filter(status=RunStatus.QUEUED).aggregate(
        oldest=Min("created_at"), count=Count("pk")
    )
    count = queued["count"]
    oldest_age = _age(queued["oldest"])
    data = {"queued_runs": count, "oldest_queued_age": oldest_age}
    if not count:
        return Check("queue", True, "No run is waiting.", data)
    return Check(
        "queue",
        True,
        f"{count} run(s) waiting; the oldest for {int(oldest_age or 0)} s.",
        data,
    )


def _age(moment) -> float | None:
    if moment is None:
        return None
    return round(max(0.0, (timezone.now() - moment).total_seconds()), 1)


# --------------------------------------------------------------------------------------
# Cheap answers for every page


def worker_alive() -> bool | None:
    """One query: is any worker alive? None when the database cannot say."""
    from tools_app.models import WorkerHeartbeat

    try:
        return WorkerHeartbeat.objects.alive().exists()
    except DatabaseError:
        return None


def worker_wait() -> float | None:
    """For a queued run's page: None while a worker is alive, else seconds since any worker
    was last seen (-1 when none ever was). One query."""
    from tools_app.models import WorkerHeartbeat

    newest = WorkerHeartbeat.objects.aggregate(newest=Max("seen_at"))["newest"]
    age = _age(newest)
    if age is not None and age < _alive_window():
        return None
    return -1.0 if age is None else age


def _alive_window() -> float:
    from tools_app.models.workers import BEATS_BEFORE_DEAD

    return BEATS_BEFORE_DEAD * float(settings.WORKER_HEARTBEAT_SECONDS)
