"""What metrics and structured logs cost, side by side in one process on a fresh SQLite
database in a temporary state folder:

- a request (GET /healthz through the test client) with and without
  RequestContextMiddleware (request id, X-Request-ID, latency histogram);
- what a run gains: the JSON log lines it now writes (one in the web, two in the worker),
  the worker's bind/clear of its ids, plain against JSON;
- a scrape of /metrics (render(), cache off) over 1 tool / 10 runs and 50 tools / 5000
  runs: the queries it makes and its time.

Prints the median of many calls (µs or ms); the issue's budget is 2 ms a warm run.

    python bench/metrics.py
"""

from __future__ import annotations

import io
import logging
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
STATE = tempfile.mkdtemp(prefix="bench-metrics-")
os.environ.update(
    {
        "DJANGO_SETTINGS_MODULE": "console.settings",
        "CONSOLE_STATE_DIR": STATE,
        "DATA_PATH": str(Path(STATE) / "data"),
        "CONSOLE_LOG_LEVEL": "WARNING",
        "CONSOLE_METRICS_CACHE_SECONDS": "0",
        "CONSOLE_METRICS_PUBLIC": "True",
        "CONSOLE_ALLOWED_HOSTS": "testserver",
    }
)
os.environ.pop("DATABASE_URL", None)

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client, override_settings  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402

from tests.support import tool_files  # noqa: E402
from tools_app.audit import Actor  # noqa: E402
from tools_app.catalog.versions import save_version  # noqa: E402
from tools_app.models import Run, Tool  # noqa: E402
from tools_app.ops import logcontext, metrics  # noqa: E402


def median_us(fn: Callable[[], object], n: int) -> float:
    for _ in range(min(50, n)):
        fn()
    times = []
    for _ in range(n):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1e6


def requests() -> None:
    client = Client()
    with_mw = median_us(lambda: client.get("/healthz"), 2000)
    from django.conf import settings

    without = [m for m in settings.MIDDLEWARE if not m.endswith("RequestContextMiddleware")]
    with override_settings(MIDDLEWARE=without):
        bare = Client()
        without_mw = median_us(lambda: bare.get("/healthz"), 2000)
    print(f"GET /healthz        without {without_mw:8.1f} µs   with {with_mw:8.1f} µs   "
          f"added {with_mw - without_mw:+7.1f} µs")  # fmt: skip


def log_lines() -> None:
    logger = logging.getLogger("bench.metrics")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    results = {}
    for name, formatter in (
        ("plain", logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s")),
        ("json", logcontext.JsonFormatter()),
    ):
        handler = logging.StreamHandler(io.StringIO())
        handler.setFormatter(formatter)
        handler.addFilter(logcontext.ContextFilter())
        logger.handlers = [handler]

        def one_run() -> None:
            # What a run now adds: the web's "queued" line, the worker's bind, its two
            # lines, its clear.
            logger.info("run %s queued: %s v%s via %s", "5b1f" * 9, "greet", 3, "api")
            logcontext.bind(request="9f0c" * 8, run="5b1f" * 9)
            logger.info("run %s received", "5b1f" * 9)
            logger.info("run %s done in %.0f ms", "5b1f" * 9, 12.0)
            logcontext.clear()

        results[name] = median_us(one_run, 5000)
    print(f"a run's log lines   plain   {results['plain']:8.1f} µs   json {results['json']:8.1f} µs"
          "   (3 lines + bind/clear)")  # fmt: skip


def scrapes() -> None:
    save_version("t0", tool_files("t0", "python"), actor=Actor.system(), publish=True)
    tool = Tool.objects.get(name="t0")
    make = lambda tool, n: Run.objects.bulk_create(  # noqa: E731
        Run(
            tool=tool,
            version=tool.published_version,
            via=("api", "mcp", "browser")[i % 3],
            status=("succeeded", "failed", "timed_out", "queued")[i % 4],
            duration=i % 90 / 3,
            spare=i % 2 == 0,
        )  # fmt: skip
        for i in range(n)
    )
    make(tool, 10)
    rows = []
    for label in ("1 tool, 10 runs", "50 tools, 5000 runs"):
        if label.startswith("50"):
            for n in range(1, 50):
                save_version(f"t{n}", tool_files(f"t{n}", "python"), actor=Actor.system(),
                             publish=True)  # fmt: skip
                make(Tool.objects.get(name=f"t{n}"), 100)
            make(tool, 90)
        with CaptureQueriesContext(connection) as seen:
            metrics.render()
        rows.append((label, len(seen), median_us(metrics.render, 200) / 1000))
    line = "   ".join(f"{label}: {q} queries {ms:6.2f} ms" for label, q, ms in rows)
    print(f"/metrics scrape     {line}")


if __name__ == "__main__":
    call_command("migrate", verbosity=0)
    call_command("signing_keys", "create", "--if-missing", stdout=io.StringIO())
    requests()
    log_lines()
    scrapes()
