"""Gunicorn settings for Tool Console: `gunicorn console.asgi:application -c
console/gunicorn.conf.py`. Uvicorn workers serve the ASGI app (MCP at /mcp, Django in a
pool of CONSOLE_WEB_THREADS threads per worker, see console/asgi.py). Seed sync runs once
per server start, before workers fork; it is idempotent and safe when several servers
start at once."""

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
    if os.getenv("CONSOLE_SYNC_ON_START", "1") != "1":
        return
    import django
    from django.core.management import call_command

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    django.setup()
    try:
        call_command("sync_tools")
    except SystemExit:
        pass  # invalid seed tools were reported; the console still starts
    except Exception as exc:  # never keep the console from starting over a sync problem
        server.log.error("seed sync failed: %s", exc)
