import os

from celery import Celery, signals

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")

app = Celery("console")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


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
