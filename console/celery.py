import os

from celery import Celery, bootsteps, signals

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")

app = Celery("console")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


class WorkerHeartbeat(bootsteps.StartStopStep):
    """Beat a WorkerHeartbeat row from the worker's main process (tools_app/heartbeat.py),
    once its pool is up."""

    requires = {"celery.worker.components:Pool"}

    def __init__(self, worker, **kwargs) -> None:
        self.beater = None

    def start(self, worker) -> None:
        from tools_app.heartbeat import Beater

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


@signals.task_prerun.connect
def close_old_connections(**kwargs) -> None:
    """Drop connections that are broken or older than CONN_MAX_AGE before each task (the
    request_started handler's job in the web server)."""
    from django.db import close_old_connections

    close_old_connections()


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
