"""Benchmark: a tool's page with its analytics against the same tool's page without them,
over 1,000,000 runs on PostgreSQL.

    .venv/bin/python bench/analytics.py [--runs 1000000] [--tools 200] [--rounds 15]
        [--database-url postgres://postgres@127.0.0.1:5432/analytics_bench] [--reuse]

Drops and creates that database (--reuse keeps one a previous run filled), migrates it and
saves `--tools` published tools; one of them, `hot`, has 8 versions and a tenth of the
runs (the tool everyone calls), the others share the rest unevenly. The runs are spread
over 90 days, inserted by one INSERT ... SELECT over generate_series, with realistic
outcomes (about 90 % succeeded, 6 % errors, 2 % cancelled, 1 % lost, a few queued or
running), durations (log-normal around a second) and queue waits (up to 2 s); then
VACUUM ANALYZE, as autovacuum would have done by then. Then the hourly rollups the
Analytics tab reads (tools_app/analytics/rollup.py) are built as production builds them,
by the beat task's function (`rollup.roll_up`, the last 32 days of every tool), timed
apart; with --reuse it runs again and rolls up only the hours closed since.

Each page is fetched with Django's test client, logged in as an admin, in interleaved
rounds (so drift in machine load hits them alike), each round starting one page further
along; the medians are reported:

- without: /tools/hot/ (the Overview tab: the tool's head and tabs, no analytics);
- with: /tools/hot/analytics/ (the same head and tabs with the default 7-day analytics);
- and, reported without a target, the 24-hour and 30-day windows, one version, the
  default page with nothing kept (each web process keeps the sums of the rolled-up hours
  it read while their mark is unchanged: this is the first read after a change), and the
  console's /analytics/ page.

Target: with <= 1.5 x without, and under 300 ms. The last line printed is a JSON object
with every number."""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit

from benchserver import REPO, console_env, lookup_tool_files

TARGET_RATIO = 1.5
TARGET_MS = 300.0
HOT_VERSIONS = 8
DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/analytics_bench"

PAGES = {
    "without": "/tools/hot/",
    "with": "/tools/hot/analytics/",
    "with_24h": "/tools/hot/analytics/?window=24h",
    "with_30d": "/tools/hot/analytics/?window=30d",
    "with_one_version": f"/tools/hot/analytics/?version={HOT_VERSIONS}&compare=1",
    # The same as "with", each time without the sums a process keeps of the rolled-up
    # hours (rollup.KEPT_DIGESTS): the first read after the mark moved or an hour changed.
    "with_nothing_kept": "/tools/hot/analytics/",
    "console_7d": "/analytics/",
    "console_30d": "/analytics/?window=30d",
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=1_000_000)
    parser.add_argument("--tools", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--database-url", default=DEFAULT_URL)
    parser.add_argument("--reuse", action="store_true", help="keep the runs of a previous run")
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="bench-analytics-"))
    env = console_env(workdir, web_workers=1) | {
        "DATABASE_URL": args.database_url,
        "CONSOLE_ALLOWED_HOSTS": "testserver",
    }
    os.environ.update(env)
    try:
        if not args.reuse:
            recreate(args.database_url)
        sys.path.insert(0, str(REPO))
        import django

        django.setup()
        prepare(args)
        result = measure(args)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    report(result)
    return 0


def recreate(url: str) -> None:
    import psycopg

    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    admin = parts._replace(path="/postgres").geturl()
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')


def prepare(args: argparse.Namespace) -> None:
    from django.core.management import call_command
    from django.db import connection

    from tools_app.audit import Actor
    from tools_app.catalog.versions import save_version
    from tools_app.models import Run, Tool

    call_command("migrate", verbosity=0)
    if Run.objects.exists():
        print(f"reusing {Run.objects.count()} runs", flush=True)
        roll_up()
        return
    started = time.monotonic()
    call_command("signing_keys", "create", "--if-missing", stdout=io.StringIO())
    actor = Actor.system()
    for n in range(1, HOT_VERSIONS + 1):
        save_version("hot", lookup_tool_files("hot", n), actor=actor, publish=True)
    for i in range(args.tools - 1):
        save_version(f"tool_{i:03d}", lookup_tool_files(f"tool_{i:03d}"), actor=actor, publish=True)
    print(f"saved {args.tools} tools in {time.monotonic() - started:.1f}s", flush=True)

    started = time.monotonic()
    hot = Tool.objects.get(name="hot").pk
    with connection.cursor() as cursor:
        cursor.execute(INSERT_RUNS, {"runs": args.runs, "hot": hot, "versions": HOT_VERSIONS})
    print(f"inserted {args.runs} runs in {time.monotonic() - started:.1f}s", flush=True)
    started = time.monotonic()
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE tools_app_run")
    print(f"vacuum analyze in {time.monotonic() - started:.1f}s", flush=True)
    roll_up()


def roll_up() -> None:
    """The beat's work (tools_app.tasks.roll_up_runs), timed apart from the pages."""
    from tools_app.analytics import rollup

    started = time.monotonic()
    tools = rollup.roll_up()
    print(f"rolled up {tools} tools' hours in {time.monotonic() - started:.1f}s", flush=True)


# Per row: r_tool picks the tool (a tenth for hot, the rest skewed towards the first
# tools), r_age the age (uniform over 90 days), r_status the outcome. Hot's runs go to
# its newest version for the last 10 days, the one before for the 10 before, and so on.
INSERT_RUNS = """
WITH tools AS (
    SELECT id, row_number() OVER (ORDER BY id) - 1 AS i
    FROM tools_app_tool WHERE id <> %(hot)s
), counted AS (
    SELECT count(*) AS n FROM tools
), draws AS (
    SELECT random() AS r_tool, random() * 90 AS age_days, random() AS r_status,
           random() AS r_duration, random() AS r_wait
    FROM generate_series(1, %(runs)s)
), picked AS (
    SELECT d.*, coalesce(t.id, %(hot)s) AS tool_id,
           now() - d.age_days * interval '1 day' AS created_at,
           exp(d.r_duration * 4 - 2) AS seconds
    FROM draws d CROSS JOIN counted c
    LEFT JOIN tools t ON d.r_tool >= 0.1
        AND t.i = least(c.n - 1, floor(power((d.r_tool - 0.1) / 0.9, 2) * c.n)::bigint)
)
INSERT INTO tools_app_run (
    id, status, via, params, sealed_params, error, stderr_tail, notices, isolation,
    isolation_reason, cancel_requested, worker, created_at, started_at, finished_at,
    tool_id, version_id, spare, network_policy, cpu_limit, egress_allows, replay_sample,
    request_id, duration
)
SELECT gen_random_uuid(),
       CASE WHEN p.age_days < 0.0007 AND p.r_status < 0.5 THEN 'running'
            WHEN p.r_status < 0.90 THEN 'succeeded'
            WHEN p.r_status < 0.95 THEN 'failed'
            WHEN p.r_status < 0.96 THEN 'timed_out'
            WHEN p.r_status < 0.98 THEN 'cancelled'
            WHEN p.r_status < 0.99 THEN 'lost'
            ELSE 'succeeded' END,
       'api', '{}'::jsonb, '', '', '', '[]'::jsonb, 'bwrap', '', false, 'bench',
       p.created_at,
       p.created_at + p.r_wait * 2 * interval '1 second',
       p.created_at + (p.r_wait * 2 + p.seconds) * interval '1 second',
       p.tool_id, v.id, false, '', '1 CPU', '[]'::jsonb, '', '',
       CASE WHEN p.r_status >= 0.98 AND p.r_status < 0.99 THEN NULL ELSE p.seconds END
FROM picked p
JOIN tools_app_toolversion v ON v.tool_id = p.tool_id
    AND v.number = CASE WHEN p.tool_id = %(hot)s
                        THEN greatest(1, %(versions)s - floor(p.age_days / 10)::int)
                        ELSE 1 END
"""


def measure(args: argparse.Namespace) -> dict:
    from django.contrib.auth.models import User
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone

    from tools_app.analytics import rollup
    from tools_app.models import Run, Tool

    admin, _ = User.objects.get_or_create(username="bench", defaults={"is_superuser": True})
    admin.is_superuser = admin.is_staff = True
    admin.save()
    client = Client()
    client.force_login(admin)
    hot = Tool.objects.get(name="hot")
    queries = {}
    for name, path in PAGES.items():  # warm caches, check every page answers
        with CaptureQueriesContext(connection) as seen:
            response = client.get(path)
        assert response.status_code == 200, (path, response.status_code)
        queries[name] = len(seen)
    samples: dict[str, list[float]] = {name: [] for name in PAGES}
    names = list(PAGES)
    for round_number in range(1, args.rounds + 1):
        # Each round starts one page later, so no page always follows the same one (the
        # page after the Overview pays for the garbage it left).
        shift = round_number % len(names)
        for name in names[shift:] + names[:shift]:
            path = PAGES[name]
            kept = rollup.KEPT_DIGESTS
            if name == "with_nothing_kept":
                rollup.KEPT_DIGESTS = rollup.Kept(0)  # keeps nothing; the others stay
            started = time.perf_counter()
            response = client.get(path)
            samples[name].append((time.perf_counter() - started) * 1000)
            rollup.KEPT_DIGESTS = kept
            assert response.status_code == 200
        line = "  ".join(f"{name} {samples[name][-1]:7.1f}" for name in PAGES)
        print(f"round {round_number:2}: {line} (ms)", flush=True)
    median = {name: statistics.median(values) for name, values in samples.items()}
    ratio = statistics.median(
        w / wo for w, wo in zip(samples["with"], samples["without"], strict=True)
    )
    total = Run.objects.count()
    return {
        "runs": total,
        "hot_runs": Run.objects.filter(tool=hot).count(),
        "hot_runs_7d": Run.objects.filter(
            tool=hot, created_at__gt=timezone.now() - timedelta(days=7)
        ).count(),
        "tools": Tool.objects.count(),
        "rounds": args.rounds,
        "load_average": os.getloadavg()[0],
        "ms": {name: round(value, 1) for name, value in median.items()},
        "queries": queries,
        "ratio": round(ratio, 3),
        "targets": {"ratio": TARGET_RATIO, "with_ms": TARGET_MS},
        "met": ratio <= TARGET_RATIO and median["with"] < TARGET_MS,
    }


def report(result: dict) -> None:
    ms, queries = result["ms"], result["queries"]
    print()
    print(
        f"{result['runs']} runs, {result['hot_runs']} of them hot's "
        f"({result['hot_runs_7d']} in the last 7 days), {result['tools']} tools"
    )
    print(f"tool page without analytics  {ms['without']:8.1f} ms  ({queries['without']} queries)")
    print(
        f"tool page with analytics     {ms['with']:8.1f} ms  ({queries['with']} queries)"
        f"  ratio {result['ratio']:.2f} (target <= {TARGET_RATIO}, under {TARGET_MS:.0f} ms)"
        f"  {'met' if result['met'] else 'MISSED'}"
    )
    for name in (
        *("with_24h", "with_30d", "with_one_version", "with_nothing_kept"),
        *("console_7d", "console_30d"),
    ):
        print(f"  {name:<26} {ms[name]:8.1f} ms  ({queries[name]} queries)")
    print(json.dumps(result))


if __name__ == "__main__":
    sys.exit(main())
