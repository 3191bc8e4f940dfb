"""Benchmark: `manage.py backup` and `manage.py restore` of a PostgreSQL console with
100,000 runs and 10,000 versions, beside `pg_dump -Fc` and `pg_restore` of the same
database (where pg_dump is installed).

    .venv/bin/python bench/backup.py [--runs 100000] [--tools 100] [--versions 10000]
        [--database-url postgres://postgres@127.0.0.1:5432/backup_bench] [--reuse]

Drops and creates that database (--reuse keeps one a previous run filled), migrates it
and saves `--tools` published tools through the console; their other versions are copies
of each tool's first one (INSERT ... SELECT, numbers 2, 3, ...) up to `--versions` in all,
and the runs one INSERT ... SELECT over generate_series, spread over the tools, with
params, a result and realistic outcomes. Then VACUUM ANALYZE.

Measured, each once, as the processes an admin would start (so Django's start-up, about
2 s, is part of the console's figures):
- backup: `manage.py backup --quiet --output FILE`;
- restore: `manage.py restore FILE` into a new database `migrate` prepared (not timed);
- pg_dump: `pg_dump -Fc` of the same database; pg_restore: into a new, empty database.

Target: backup and restore each within 2 x pg_dump's and pg_restore's time. The last line
printed is a JSON object with every number."""

from __future__ import annotations

import argparse
import base64
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

from benchserver import REPO, console_env, lookup_tool_files

TARGET_RATIO = 2.0
# A fixed key, so --reuse restores what an earlier run sealed (bench data only).
BENCH_KEY = base64.urlsafe_b64encode(hashlib.sha256(b"bench/backup.py").digest()).decode()
DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/backup_bench"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--tools", type=int, default=100)
    parser.add_argument("--versions", type=int, default=10_000)
    parser.add_argument("--database-url", default=DEFAULT_URL)
    parser.add_argument("--reuse", action="store_true", help="keep the rows of a previous run")
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="bench-backup-"))
    env = console_env(workdir, web_workers=1) | {
        "DATABASE_URL": args.database_url,
        "CONSOLE_ENCRYPTION_KEYS": BENCH_KEY,
    }
    os.environ.update(env)
    target_url = _sibling(args.database_url, "_restored")
    dump_target_url = _sibling(args.database_url, "_pg_restored")
    try:
        if not args.reuse:
            recreate(args.database_url)
        sys.path.insert(0, str(REPO))
        import django

        django.setup()
        prepare(args)
        result = measure(args, workdir, env, target_url, dump_target_url)
    finally:
        for url in (target_url, dump_target_url):
            drop(url)
        shutil.rmtree(workdir, ignore_errors=True)
    report(result)
    return 0


def _sibling(url: str, suffix: str) -> str:
    parts = urlsplit(url)
    return parts._replace(path=parts.path + suffix).geturl()


def _admin(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return parts._replace(path="/postgres").geturl(), parts.path.lstrip("/")


def recreate(url: str) -> None:
    import psycopg

    admin, name = _admin(url)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def drop(url: str) -> None:
    import psycopg

    admin, name = _admin(url)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def prepare(args: argparse.Namespace) -> None:
    from django.core.management import call_command
    from django.db import connection

    from tools_app.audit import Actor
    from tools_app.catalog.versions import save_version
    from tools_app.models import Run, Tool, ToolVersion

    call_command("migrate", verbosity=0)
    if Run.objects.exists():
        print(f"reusing {Run.objects.count()} runs", flush=True)
        return
    started = time.monotonic()
    call_command("signing_keys", "create", "--if-missing", stdout=io.StringIO())
    actor = Actor.system()
    for i in range(args.tools):
        save_version(f"tool_{i:03d}", lookup_tool_files(f"tool_{i:03d}"), actor=actor, publish=True)
    print(f"saved {args.tools} tools in {time.monotonic() - started:.1f}s", flush=True)

    started = time.monotonic()
    per_tool = max(1, args.versions // args.tools)
    columns = [
        f.column for f in ToolVersion._meta.concrete_fields if f.column not in ("id", "number")
    ]
    listed = ", ".join(columns)
    chosen = ", ".join(f"v.{c}" for c in columns)
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO tools_app_toolversion (number, {listed}) "  # noqa: S608
            f"SELECT n, {chosen} FROM tools_app_toolversion v, "
            "generate_series(2, %s) n WHERE v.number = 1",
            [per_tool],
        )
        cursor.execute(INSERT_RUNS, {"runs": args.runs})
        cursor.execute("VACUUM ANALYZE")
    print(
        f"inserted {ToolVersion.objects.count()} versions and {Run.objects.count()} runs "
        f"in {time.monotonic() - started:.1f}s",
        flush=True,
    )
    assert Tool.objects.count() == args.tools


INSERT_RUNS = """
WITH versions AS (
    SELECT id, tool_id, row_number() OVER (ORDER BY id) - 1 AS i
    FROM tools_app_toolversion WHERE number = 1
), counted AS (SELECT count(*) AS n FROM versions), draws AS (
    SELECT g, random() AS r_tool, random() * 90 AS age_days, random() AS r_status,
           exp(random() * 4 - 2) AS seconds
    FROM generate_series(1, %(runs)s) g
)
INSERT INTO tools_app_run (
    id, status, via, params, sealed_params, result, error, stderr_tail, notices, isolation,
    isolation_reason, cancel_requested, worker, created_at, started_at, finished_at,
    tool_id, version_id, spare, network_policy, cpu_limit, egress_allows, replay_sample,
    duration, request_id
)
SELECT gen_random_uuid(),
       CASE WHEN d.r_status < 0.9 THEN 'succeeded' WHEN d.r_status < 0.97 THEN 'failed'
            ELSE 'cancelled' END,
       'api', jsonb_build_object('query', 'query number ' || d.g, 'limit', 10), '',
       jsonb_build_object('content', jsonb_build_array(jsonb_build_object(
           'type', 'text', 'text', 'result ' || d.g || ': ' || md5(d.g::text))),
           'isError', false),
       '', '', '[]'::jsonb, 'bwrap', '', false, 'worker1@bench',
       now() - d.age_days * interval '1 day',
       now() - d.age_days * interval '1 day' + interval '50 milliseconds',
       now() - d.age_days * interval '1 day' + d.seconds * interval '1 second',
       v.tool_id, v.id, false, 'allow: api.example.com', '1 CPU', '[]'::jsonb, '',
       d.seconds, md5(d.g::text)
FROM draws d CROSS JOIN counted c
JOIN versions v ON v.i = least(c.n - 1, floor(d.r_tool * c.n)::bigint)
"""


def timed(command: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    result = subprocess.run(command, env=env, cwd=REPO, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{result.stdout}\n{result.stderr}")
    return elapsed


def measure(
    args: argparse.Namespace, workdir: Path, env: dict, target_url: str, dump_target_url: str
) -> dict:
    from tools_app.models import Run, ToolVersion

    manage = [sys.executable, str(REPO / "manage.py")]
    archive = workdir / "console.tar"
    backup_s = timed([*manage, "backup", "--quiet", "--output", str(archive)], env)
    print(f"backup: {backup_s:.2f}s, {archive.stat().st_size} bytes", flush=True)

    recreate(target_url)
    target_env = {**env, "DATABASE_URL": target_url}
    timed([*manage, "migrate", "-v", "0"], target_env)
    restore_s = timed([*manage, "restore", "--quiet", str(archive)], target_env)
    print(f"restore: {restore_s:.2f}s", flush=True)

    result: dict = {
        "runs": Run.objects.count(),
        "versions": ToolVersion.objects.count(),
        "load_average": os.getloadavg()[0],
        "backup_s": round(backup_s, 2),
        "restore_s": round(restore_s, 2),
        "archive_bytes": archive.stat().st_size,
    }
    pg_dump, pg_restore = shutil.which("pg_dump"), shutil.which("pg_restore")
    if pg_dump and pg_restore:
        dump = workdir / "console.dump"
        dump_s = timed([pg_dump, "-Fc", "-f", str(dump), args.database_url], env)
        recreate(dump_target_url)
        pg_restore_s = timed([pg_restore, "-d", dump_target_url, str(dump)], env)
        print(f"pg_dump -Fc: {dump_s:.2f}s, {dump.stat().st_size} bytes", flush=True)
        print(f"pg_restore: {pg_restore_s:.2f}s", flush=True)
        result |= {
            "pg_dump_s": round(dump_s, 2),
            "pg_restore_s": round(pg_restore_s, 2),
            "pg_dump_bytes": dump.stat().st_size,
            "backup_ratio": round(backup_s / dump_s, 2),
            "restore_ratio": round(restore_s / pg_restore_s, 2),
            "size_ratio": round(archive.stat().st_size / dump.stat().st_size, 2),
            "target_ratio": TARGET_RATIO,
        }
        result["met"] = (
            result["backup_ratio"] <= TARGET_RATIO and result["restore_ratio"] <= TARGET_RATIO
        )
    else:
        result["pg_dump"] = "not installed"
    return result


def report(result: dict) -> None:
    print(json.dumps(result))


if __name__ == "__main__":
    raise SystemExit(main())
