"""Benchmark: GET /api/v1/registry with 1,000 published tools, against a trivial JSON view.

    .venv/bin/python bench/registry.py [--tools 1000] [--seconds 5] [--rounds 3]

Fills a throwaway SQLite database (in a temporary folder, with its own state dir and
DATA_PATH) with published tools, serves the app with gunicorn (2 workers, the project's
gunicorn.conf.py) on a free loopback port and measures, with wrk when it is installed (else
a small keep-alive Python load generator):

- trivial: GET /api/healthz, a JSON view with no auth and no database;
- full: GET /api/v1/registry with a token, the whole answer;
- 304: the same with If-None-Match set to the answer's ETag.

The three are measured in interleaved rounds (the median counts) so drift in machine load
hits them alike. Targets: full >= 50% and 304 >= 80% of the trivial view's rate. The last
line printed is a JSON object with every number."""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TARGETS = {"full": 0.5, "not_modified": 0.8}
WORKERS = 2
CONNECTIONS = 8


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tools", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=5.0, help="per measurement")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="bench-registry-"))
    env = bench_env(workdir)
    os.environ.update(env)
    server = None
    try:
        token = prepare(args.tools)
        port = free_port()
        server = start_gunicorn(env, port, workdir)
        base = f"http://127.0.0.1:{port}"
        wait_until_up(port)
        result = measure(base, port, token, args)
    finally:
        if server is not None:
            stop(server)
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    report(result)
    return 0


def bench_env(workdir: Path) -> dict[str, str]:
    (workdir / "seed" / "tools").mkdir(parents=True)
    return {
        "DJANGO_SETTINGS_MODULE": "console.settings",
        "DATABASE_URL": f"sqlite:///{workdir / 'console.sqlite3'}",
        "CONSOLE_STATE_DIR": str(workdir / "state"),
        "DATA_PATH": str(workdir / "data"),
        "CONSOLE_SEED_PATH": str(workdir / "seed"),
        "CONSOLE_SYNC_ON_START": "0",
        "CONSOLE_SECRET_KEY": secrets.token_urlsafe(50),
        "CONSOLE_ALLOWED_HOSTS": "127.0.0.1,localhost",
        "CONSOLE_DEBUG": "0",
        "CONSOLE_LOG_LEVEL": "WARNING",
        "WEB_CONCURRENCY": str(WORKERS),
    }


def prepare(count: int) -> str:
    """Migrate, publish `count` tools, return a registry:read token."""
    sys.path.insert(0, str(REPO))
    import django

    django.setup()
    from django.core.management import call_command

    from tools_app.audit import Actor
    from tools_app.models import AgentToken
    from tools_app.versions import save_version

    started = time.monotonic()
    call_command("migrate", verbosity=0)
    actor = Actor.system()
    for i in range(count):
        name = f"tool_{i:04d}"
        save_version(name, tool_files(name, i), actor=actor, publish=True)
    _, raw = AgentToken.issue("bench", ["registry:read"])
    print(f"prepared {count} published tools in {time.monotonic() - started:.1f}s", flush=True)
    return raw


def tool_files(name: str, i: int) -> dict[str, bytes]:
    """A realistic tool: a few inputs of every type, some optional, defaults, an enum."""
    toolmd = f"""---
name: {name}
label: Tool number {i}
description: >-
  Fetches and summarises resource number {i}. Use it when the user asks about item {i}
  or something close to it; it returns text and never changes anything.
version: 1
language: typescript
integrations: [service_{i % 7}]
timeout: 60
inputs:
  query:
    type: string
    description: What to look for, in plain words.
  limit:
    type: integer
    description: How many results to return.
    optional: true
    default: 10
  threshold:
    type: number
    description: Minimum relevance between 0 and 1.
    optional: true
  verbose:
    type: boolean
    description: Include details.
    optional: true
    default: false
  mode:
    type: enum
    values: fast,thorough,exhaustive
    description: How hard to try.
    optional: true
    default: fast
  api_token:
    type: string
    description: Overrides the integration's token.
    optional: true
    sensitive: true
---

# Tool {i}

## Usage

Call it with a query.
"""
    entry = (
        "export async function execute(toolCallId: string, params: any) {\n"
        "  return { content: [{ type: 'text', text: 'ok' }] };\n}\n"
    )
    return {"TOOL.md": toolmd.encode(), "index.ts": entry.encode()}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_gunicorn(env: dict[str, str], port: int, workdir: Path) -> subprocess.Popen:
    log = open(workdir / "gunicorn.log", "wb")  # noqa: SIM115 (closed with the process)
    return subprocess.Popen(
        [
            str(Path(sys.executable).with_name("gunicorn")),
            "console.wsgi",
            "-c",
            "console/gunicorn.conf.py",
            "--workers",
            str(WORKERS),
            "--bind",
            f"127.0.0.1:{port}",
        ],
        cwd=REPO,
        env={**os.environ, **env},
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def stop(server: subprocess.Popen) -> None:
    server.send_signal(signal.SIGTERM)
    try:
        server.wait(timeout=20)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


def wait_until_up(port: int) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            status, _, _ = fetch(port, "/api/healthz", {})
            if status == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise SystemExit("gunicorn did not start; see gunicorn.log (run with --keep)")


def fetch(port: int, path: str, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", path, headers=headers)
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


def measure(base: str, port: int, token: str, args: argparse.Namespace) -> dict:
    auth = {"Authorization": f"Bearer {token}"}
    status, headers, body = fetch(port, "/api/v1/registry", auth)
    assert status == 200, (status, body[:200])
    count = json.loads(body)["count"]
    assert count == args.tools, count
    etag = headers["ETag"]
    status, _, empty = fetch(port, "/api/v1/registry", {**auth, "If-None-Match": etag})
    assert status == 304 and empty == b"", status

    cases = {
        "trivial": ("/api/healthz", {}),
        "full": ("/api/v1/registry", auth),
        "not_modified": ("/api/v1/registry", {**auth, "If-None-Match": etag}),
    }
    generator = "wrk" if shutil.which("wrk") else "python"
    run = run_wrk if generator == "wrk" else run_python
    for path, headers in cases.values():  # warm every worker's cache and connections
        run(base, port, path, headers, 1.0)
    rates: dict[str, list[float]] = {name: [] for name in cases}
    for round_number in range(1, args.rounds + 1):
        for name, (path, headers) in cases.items():
            rate = run(base, port, path, headers, args.seconds)
            rates[name].append(rate)
            print(f"round {round_number}: {name:<12} {rate:10.1f} req/s", flush=True)
    median = {name: statistics.median(values) for name, values in rates.items()}
    return {
        "tools": count,
        "body_bytes": len(body),
        "workers": WORKERS,
        "connections": CONNECTIONS,
        "seconds": args.seconds,
        "rounds": args.rounds,
        "load_generator": generator,
        "rps": {name: round(value, 1) for name, value in median.items()},
        "samples": {name: [round(v, 1) for v in values] for name, values in rates.items()},
        "ratio": {
            "full": round(median["full"] / median["trivial"], 3),
            "not_modified": round(median["not_modified"] / median["trivial"], 3),
        },
        "targets": TARGETS,
    }


def run_wrk(base: str, port: int, path: str, headers: dict[str, str], seconds: float) -> float:
    command = ["wrk", "-t2", f"-c{CONNECTIONS}", f"-d{max(1, round(seconds))}s"]
    for key, value in headers.items():
        command += ["-H", f"{key}: {value}"]
    output = subprocess.run(
        [*command, base + path], capture_output=True, text=True, check=True
    ).stdout
    if "Non-2xx or 3xx responses" in output or "Socket errors" in output:
        raise SystemExit(f"wrk saw errors on {path}:\n{output}")
    match = re.search(r"Requests/sec:\s+([0-9.]+)", output)
    if match is None:
        raise SystemExit(f"cannot read wrk's output:\n{output}")
    return float(match.group(1))


def run_python(base: str, port: int, path: str, headers: dict[str, str], seconds: float) -> float:
    """Keep-alive clients in threads, each sending requests back to back for `seconds`."""
    deadline = time.monotonic() + seconds
    counts = [0] * CONNECTIONS
    failures: list[str] = []

    def client(slot: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        while time.monotonic() < deadline:
            conn.request("GET", path, headers=headers)
            response = conn.getresponse()
            response.read()
            if response.status >= 400:
                failures.append(f"{path}: {response.status}")
                return
            if response.getheader("Connection", "").lower() == "close":
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            counts[slot] += 1
        conn.close()

    started = time.monotonic()
    threads = [threading.Thread(target=client, args=(slot,)) for slot in range(CONNECTIONS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise SystemExit(failures[0])
    return sum(counts) / (time.monotonic() - started)


def report(result: dict) -> None:
    rps, ratio = result["rps"], result["ratio"]
    print()
    print(f"{result['tools']} published tools, registry answer {result['body_bytes']:,} bytes")
    print(
        f"gunicorn {result['workers']} workers, {result['load_generator']} with "
        f"{result['connections']} connections, median of {result['rounds']} rounds"
    )
    print(f"trivial JSON view      {rps['trivial']:10.1f} req/s")
    full_ok = ratio["full"] >= TARGETS["full"]
    nm_ok = ratio["not_modified"] >= TARGETS["not_modified"]
    print(
        f"registry, full answer  {rps['full']:10.1f} req/s  {ratio['full']:6.1%} of trivial "
        f"(target {TARGETS['full']:.0%}: {'met' if full_ok else 'MISSED'})"
    )
    print(
        f"registry, 304          {rps['not_modified']:10.1f} req/s  "
        f"{ratio['not_modified']:6.1%} of trivial "
        f"(target {TARGETS['not_modified']:.0%}: {'met' if nm_ok else 'MISSED'})"
    )
    result["met"] = {"full": full_ok, "not_modified": nm_ok}
    print(json.dumps(result, sort_keys=True))


if __name__ == "__main__":
    sys.exit(main())
