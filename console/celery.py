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
