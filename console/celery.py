import logging
import os
import threading
import time
from typing import TYPE_CHECKING

from celery import Celery, bootsteps, signals

if TYPE_CHECKING:
    from celery.worker import WorkController

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")

logger = logging.getLogger("console.celery")

app = Celery("console")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


class WorkerHeartbeat(bootsteps.StartStopStep):
    """Beat a WorkerHeartbeat row from the worker's main process (tools_app/ops/heartbeat.py),
    once its pool is up."""

    requires = {"celery.worker.components:Pool"}

    def __init__(self, worker, **kwargs) -> None:
        self.beater = None

    def start(self, worker) -> None:
        from tools_app.ops.heartbeat import Beater

        try:
            queues = ",".join(sorted(worker.app.amqp.queues.consume_from or ()))
        except Exception:
            queues = ""
        self.beater = Beater(worker.hostname, queues=queues, concurrency=worker.concurrency or 0)
        self.beater.start()

    def stop(self, worker) -> None:
        if self.beater is not None:
            self.beater.stop()


app.steps["worker"].add(WorkerHeartbeat)


class WarmStripCache(bootsteps.StartStopStep):
    """Strip the TypeScript tools' types once the pool is up (execute.warm_strip_cache), so
    no pool process pays for it in its first run of a tool; from a thread of the main
    process, so the worker's start waits for nothing."""

    requires = {"celery.worker.components:Pool"}

    def __init__(self, worker: "WorkController", **kwargs: object) -> None:
        self.thread: threading.Thread | None = None

    def start(self, worker: "WorkController") -> None:
        self.thread = threading.Thread(
            target=warm_strip_cache, name="warm-strip-cache", daemon=True
        )
        self.thread.start()


def warm_strip_cache() -> None:
    """runs.warm_strip_cache, logged: a failure only costs the first runs their strip."""
    from django.db import connections

    from tools_app.ops.heartbeat import holding_forks
    from tools_app.runs import execute

    started = time.monotonic()
    try:
        stripped = execute.warm_strip_cache()
    except Exception:
        logger.exception("could not warm the TypeScript strip cache")
    else:
        ms = (time.monotonic() - started) * 1000
        logger.info("TypeScript strip cache warmed: %d files stripped in %.0f ms", stripped, ms)
    finally:
        with holding_forks():
            connections.close_all()  # this thread's


app.steps["worker"].add(WarmStripCache)


@signals.task_prerun.connect
def close_old_connections(**kwargs) -> None:
    """Drop connections that are broken or older than CONN_MAX_AGE before each task (the
    request_started handler's job in the web server)."""
    from django.db import close_old_connections

    close_old_connections()


@signals.task_prerun.connect
def bind_log_context(task=None, args=None, **kwargs) -> None:
    """A run's log lines in the worker carry the request id that started it (a message
    header) and its run id (tools_app/ops/logcontext.py)."""
    from tools_app.ops import logcontext
    from tools_app.runs.start import EXECUTE_RUN_TASK, REQUEST_ID_HEADER

    request = getattr(task, "request", None)
    headers = getattr(request, "headers", None) or {}
    raw = getattr(request, REQUEST_ID_HEADER, None) or headers.get(REQUEST_ID_HEADER)
    run = str(args[0]) if getattr(task, "name", "") == EXECUTE_RUN_TASK and args else ""
    logcontext.bind(request=logcontext.sane_request_id(raw), run=run)


@signals.task_postrun.connect
def clear_log_context(**kwargs) -> None:
    from tools_app.ops import logcontext

    logcontext.clear()


@signals.after_setup_logger.connect
@signals.after_setup_task_logger.connect
def json_log_lines(logger=None, **kwargs) -> None:
    """Celery replaces the root logger's handlers with its own: with CONSOLE_LOG_FORMAT=json
    they write the console's JSON lines instead of its text format."""
    from django.conf import settings

    from tools_app.ops import logcontext

    if settings.LOG_FORMAT != "json" or logger is None:
        return
    for handler in logger.handlers:
        handler.setFormatter(logcontext.JsonFormatter())
        handler.addFilter(logcontext.ContextFilter())


@signals.worker_process_shutdown.connect
def discard_spare_sandbox(**kwargs) -> None:
    """A pool process that stops takes its spare sandbox down with it, folder included
    (its processes would die with it anyway: bwrap --die-with-parent)."""
    from tools_app.runner import standby

    standby.discard_spare()


@signals.worker_process_shutdown.connect
def finish_teardowns(**kwargs) -> None:
    """A pool process that stops first finishes the teardowns of its last runs
    (tools_app/runner/teardown.py): billiard ends pool processes with os._exit, so the
    atexit hook would never run."""
    from tools_app.runner import teardown

    teardown.drain()
