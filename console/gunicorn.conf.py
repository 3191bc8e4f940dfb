"""Gunicorn settings for Tool Console: `gunicorn console.asgi:application -c
console/gunicorn.conf.py`. Uvicorn workers serve the ASGI app (MCP at /mcp, Django in a
pool of CONSOLE_WEB_THREADS threads per worker, see console/asgi.py). Seed sync runs once
per server start, before workers fork, after `signing_keys create --if-missing` (publishing
signs); both are idempotent and safe when several servers start at once."""

import os

workers = int(os.getenv("WEB_CONCURRENCY", "2"))
# Django's thread pool size is read by console/asgi.py from CONSOLE_WEB_THREADS.
worker_class = "uvicorn_worker.UvicornWorker"
timeout = 60
accesslog = "-"
# The access log must never carry query strings with secrets; ours never put them there,
# but keep the format short anyway.
access_log_format = '%(h)s "%(m)s %(U)s" %(s)s %(b)s %(L)ss'


def on_starting(server) -> None:
    prepare_metrics_dir()
    if os.getenv("CONSOLE_SYNC_ON_START", "1") != "1":
        return
    import django
    from django.core.management import call_command

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    django.setup()
    try:
        # The key ring first: seed sync publishes, and publishing signs (docs/signing.md).
        call_command("signing_keys", "create", "--if-missing")
    except Exception as exc:  # publishing reports it; the console still starts
        server.log.error("signing keys: %s", exc)
    try:
        call_command("sync_tools")
    except SystemExit:
        pass  # invalid seed tools were reported; the console still starts
    except Exception as exc:  # never keep the console from starting over a sync problem
        server.log.error("seed sync failed: %s", exc)


def prepare_metrics_dir() -> None:
    """prometheus_client's multiprocess mode (tools_app/ops/metrics.py): each worker keeps
    its request latencies in files of PROMETHEUS_MULTIPROC_DIR, /metrics adds them up.
    Emptied here, in the master before any worker starts, never by a worker (they would
    wipe each other's counts); STATE_DIR/metrics unless the variable names a folder."""
    from pathlib import Path

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from django.conf import settings

        os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(Path(settings.STATE_DIR) / "metrics")
    folder = Path(os.environ["PROMETHEUS_MULTIPROC_DIR"])
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    folder.chmod(0o700)
    for path in folder.glob("*.db"):
        if path.is_file():
            path.unlink()


def child_exit(server, worker) -> None:
    """A dead worker's live gauges go; its counts stay in the sum (multiprocess mode)."""
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)
