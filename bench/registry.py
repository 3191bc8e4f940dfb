"""Benchmark: GET /api/v1/registry with 1,000 published tools, against a trivial JSON view.

    .venv/bin/python bench/registry.py [--tools 1000] [--seconds 3] [--rounds 5]

Fills a throwaway SQLite database (in a temporary folder, with its own state dir and
DATA_PATH) with published tools, serves the app with gunicorn (2 workers, the project's
gunicorn.conf.py) on a free loopback port and measures, with wrk when it is installed (else
a small keep-alive Python load generator):

- trivial: GET /api/healthz, a JSON view with no auth and no database;
- full: GET /api/v1/registry with a token, the whole answer;
- 304: the same with If-None-Match set to the answer's ETag;
- full_gzip (reported, no target): the full answer for clients that accept gzip.

They are measured in interleaved rounds so drift in machine load hits them alike; a ratio
is the median of the rounds' own ratios. Targets: full >= 50% and 304 >= 80% of the
trivial view's rate. The server's CPU time per request (from /proc) is reported too: other
load on the machine barely moves it, so its ratios show what the rates would be on an idle
one. The last line printed is a JSON object with every number."""

from __future__ import annotations

import argparse
import http.client
import io
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from benchserver import REPO, console_env, free_port, start_gunicorn, stop, wait_until_up

TARGETS = {"full": 0.5, "not_modified": 0.8}
WORKERS = 2
CONNECTIONS = 8


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tools", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=3.0, help="per measurement")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="bench-registry-"))
    env = console_env(workdir, web_workers=WORKERS)
    os.environ.update(env)
    server = None
    try:
        token = prepare(args.tools)
        port = free_port()
        server = start_gunicorn(env, port, workdir, workers=WORKERS)
        base = f"http://127.0.0.1:{port}"
        wait_until_up(port, workdir)
        result = measure(base, port, token, args, server.pid)
    finally:
        if server is not None:
            stop(server)
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    report(result)
    return 0


def prepare(count: int) -> str:
    """Migrate, publish `count` tools, return a registry:read token."""
    sys.path.insert(0, str(REPO))
    import django

    django.setup()
    from django.core.management import call_command

    from tools_app.audit import Actor
    from tools_app.catalog.versions import save_version
    from tools_app.models import AgentToken

    started = time.monotonic()
    call_command("migrate", verbosity=0)
    call_command("signing_keys", "create", "--if-missing", stdout=io.StringIO())  # publishing signs
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


def fetch(port: int, path: str, headers: dict[str, str]) -> tuple[int, Any, bytes]:
    """(status, headers looked up case-insensitively (uvicorn sends them lower-case), body)"""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", path, headers=headers)
        response = conn.getresponse()
        return response.status, response.headers, response.read()
    finally:
        conn.close()


def measure(base: str, port: int, token: str, args: argparse.Namespace, master: int) -> dict:
    auth = {"Authorization": f"Bearer {token}"}
    status, headers, body = fetch(port, "/api/v1/registry", auth)
    assert status == 200, (status, body[:200])
    count = json.loads(body)["count"]
    assert count == args.tools, count
    etag = headers["ETag"]
    status, _, empty = fetch(port, "/api/v1/registry", {**auth, "If-None-Match": etag})
    assert status == 304 and empty == b"", status
    gzip_headers = {**auth, "Accept-Encoding": "gzip"}
    status, headers, gzipped = fetch(port, "/api/v1/registry", gzip_headers)
    assert status == 200 and headers.get("Content-Encoding") == "gzip", status

    cases = {
        "trivial": ("/api/healthz", {}),
        "full": ("/api/v1/registry", auth),
        "not_modified": ("/api/v1/registry", {**auth, "If-None-Match": etag}),
        # Not a target: what clients that accept gzip (httpx, requests, curl
        # --compressed) get; reported for comparison.
        "full_gzip": ("/api/v1/registry", gzip_headers),
    }
    generator = "wrk" if shutil.which("wrk") else "python"
    run = run_wrk if generator == "wrk" else run_python
    for path, headers in cases.values():  # warm every worker's cache and connections
        run(base, port, path, headers, 1.0)
    rates: dict[str, list[float]] = {name: [] for name in cases}
    cpu: dict[str, list[float]] = {name: [] for name in cases}
    for round_number in range(1, args.rounds + 1):
        for name, (path, headers) in cases.items():
            before = server_cpu_seconds(master)
            rate, requests = run(base, port, path, headers, args.seconds)
            used = server_cpu_seconds(master) - before
            rates[name].append(rate)
            cpu[name].append(used / requests * 1000 if requests else 0.0)
            print(
                f"round {round_number}: {name:<12} {rate:10.1f} req/s"
                f"  {cpu[name][-1]:6.3f} ms server CPU per request",
                flush=True,
            )
    median = {name: statistics.median(values) for name, values in rates.items()}
    cpu_median = {name: statistics.median(values) for name, values in cpu.items()}
    return {
        "tools": count,
        "body_bytes": len(body),
        "body_bytes_gzip": len(gzipped),
        "workers": WORKERS,
        "connections": CONNECTIONS,
        "seconds": args.seconds,
        "rounds": args.rounds,
        "load_generator": generator,
        "load_average": os.getloadavg()[0],
        "rps": {name: round(value, 1) for name, value in median.items()},
        "samples": {name: [round(v, 1) for v in values] for name, values in rates.items()},
        # Each round measures every case within seconds of each other; the median of the
        # rounds' own ratios is steadier than a ratio of medians when the load drifts.
        "ratio": {name: round(_round_ratio(rates, name), 3) for name in TARGETS},
        "ratio_gzip": round(_round_ratio(rates, "full_gzip"), 3),
        # Server CPU per request: the machine's other load barely moves it, so its
        # ratios show what the rates would be on an idle machine.
        "cpu_ms_per_request": {name: round(value, 3) for name, value in cpu_median.items()},
        "cpu_ratio": {
            name: round(cpu_median["trivial"] / cpu_median[name], 3)
            for name in TARGETS
            if cpu_median[name]
        },
        "targets": TARGETS,
    }


def _round_ratio(rates: dict[str, list[float]], name: str) -> float:
    return statistics.median(
        rate / trivial for rate, trivial in zip(rates[name], rates["trivial"], strict=True)
    )


def server_cpu_seconds(master_pid: int) -> float:
    """User + system CPU time of gunicorn's workers so far (Linux /proc), else 0."""
    total = 0
    try:
        children = Path(f"/proc/{master_pid}/task/{master_pid}/children").read_text().split()
        tick = os.sysconf("SC_CLK_TCK")
        for pid in children:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime
        return total / tick
    except (OSError, ValueError, IndexError):
        return 0.0


def run_wrk(
    base: str, port: int, path: str, headers: dict[str, str], seconds: float
) -> tuple[float, int]:
    command = ["wrk", "-t2", f"-c{CONNECTIONS}", f"-d{max(1, round(seconds))}s"]
    for key, value in headers.items():
        command += ["-H", f"{key}: {value}"]
    output = subprocess.run(
        [*command, base + path], capture_output=True, text=True, check=True
    ).stdout
    if "Non-2xx or 3xx responses" in output or "Socket errors" in output:
        raise SystemExit(f"wrk saw errors on {path}:\n{output}")
    rate = re.search(r"Requests/sec:\s+([0-9.]+)", output)
    total = re.search(r"([0-9]+) requests in", output)
    if rate is None or total is None:
        raise SystemExit(f"cannot read wrk's output:\n{output}")
    return float(rate.group(1)), int(total.group(1))


def run_python(
    base: str, port: int, path: str, headers: dict[str, str], seconds: float
) -> tuple[float, int]:
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
    return sum(counts) / (time.monotonic() - started), sum(counts)


def report(result: dict) -> None:
    rps, ratio, cpu = result["rps"], result["ratio"], result["cpu_ms_per_request"]
    print()
    print(
        f"{result['tools']} published tools; registry answer {result['body_bytes']:,} bytes "
        f"({result['body_bytes_gzip']:,} gzipped)"
    )
    print(
        f"gunicorn {result['workers']} workers, {result['load_generator']} with "
        f"{result['connections']} connections, median of {result['rounds']} rounds, "
        f"load average {result['load_average']:.1f}"
    )
    met = {name: ratio[name] >= target for name, target in TARGETS.items()}
    rows = [
        ("trivial JSON view", "trivial", ""),
        ("registry, full answer", "full", _verdict(ratio["full"], "full", met)),
        ("registry, 304", "not_modified", _verdict(ratio["not_modified"], "not_modified", met)),
        ("registry, full, gzip", "full_gzip", f"{result['ratio_gzip']:6.1%} of trivial"),
    ]
    for label, name, verdict in rows:
        print(f"{label:<22} {rps[name]:10.1f} req/s  {cpu[name]:6.3f} ms CPU/req  {verdict}")
    result["met"] = met
    print(json.dumps(result, sort_keys=True))


def _verdict(value: float, name: str, met: dict[str, bool]) -> str:
    state = "met" if met[name] else "MISSED"
    return f"{value:6.1%} of trivial (target {TARGETS[name]:.0%}: {state})"


if __name__ == "__main__":
    sys.exit(main())
