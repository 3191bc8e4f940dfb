"""Benchmark: a kind: http tool calling a local server through the worker, end to end via
the agent API, against httpx calling the same server directly; plus the executor's own
time per call.

    .venv/bin/python bench/http_tool.py [--runs 20] [--delays 0,100] [--broker auto]

Sets up a throwaway console like bench/invoke.py (SQLite in a temporary folder, gunicorn
with 2 workers, a Celery worker with 2 processes, Redis when it answers else the embedded
filesystem broker) and a small JSON API on 127.0.0.2 (loopback, but not the console's own
127.0.0.1), which the egress allow list names. For each server delay (the time the API
takes to answer: 0 ms is a best case no real API offers, 100 ms a typical one):

- direct: one httpx.Client (kept-alive connections, as a program calling the API would)
  getting the same URL;
- api: POST /api/v1/tools/lookup/invoke, then GET /api/v1/runs/<id>?wait=25 until the run
  has ended, timed from the POST to the answer with the mapped outputs.

Both interleaved (`--runs` each); medians and their ratio are printed (target <= 1.5).
Then the executor alone: tools_app.http_tools.execute.perform() called in this process `--runs`
times against the 0 ms server, next to httpx with a fresh connection per call (as the
executor makes) and the server's handling time: the executor's overhead per call is its
time minus httpx's.
The last line printed is a JSON object. The machine may be shared: run it more than once
before trusting a difference of a few milliseconds."""

from __future__ import annotations

import argparse
import io
import json
import shutil
import statistics
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
from benchserver import REPO
from invoke import Api, Console, pick_broker

TARGET_RATIO = 1.5
API_HOST = "127.0.0.2"
SETTLE_SECONDS = 0.2


class FakeApi:
    """GET /item/<n>?delay_ms=D answers {"data": {"id": n, "status": "READY"}} after D ms;
    `handling` collects how long each answer took inside the handler."""

    def __init__(self) -> None:
        self.handling: list[float] = []
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                started = time.perf_counter()
                parts = urlsplit(self.path)
                delay = int((parse_qs(parts.query).get("delay_ms") or ["0"])[0])
                if delay:
                    time.sleep(delay / 1000)
                item = parts.path.rsplit("/", 1)[-1]
                body = json.dumps({"data": {"id": int(item), "status": "READY"}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                api.handling.append(time.perf_counter() - started - delay / 1000)

        self.httpd = ThreadingHTTPServer((API_HOST, 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://{API_HOST}:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def toolmd(url: str) -> str:
    return (
        "---\nname: lookup\ndescription: Looks an item up in a local API.\nkind: http\n"
        "inputs:\n  n: {type: integer, description: Item}\n"
        "  delay_ms: {type: integer, description: Server delay, optional: true}\n"
        f"request:\n  method: GET\n  url: {url}/item/{{{{n}}}}\n"
        '  query: {delay_ms: "{{delay_ms}}"}\n'
        "outputs:\n  id: {type: integer, path: data.id}\n"
        "  status: {type: string, path: data.status}\n---\n# Lookup\n"
    )


def prepare(url: str) -> str:
    """Migrate, publish the http tool, return a tools:invoke token."""
    sys.path.insert(0, str(REPO))
    import django

    django.setup()
    from django.core.management import call_command

    from tools_app.audit import Actor
    from tools_app.catalog.versions import save_version
    from tools_app.models import AgentToken

    call_command("migrate", verbosity=0)
    call_command("signing_keys", "create", "--if-missing", stdout=io.StringIO())  # publishing signs
    sample = {"source": "bench", "status": 200, "body": {"data": {"id": 1, "status": "READY"}}}
    files = {"TOOL.md": toolmd(url).encode(), "samples/bench.json": json.dumps(sample).encode()}
    save_version("lookup", files, actor=Actor.system(), publish=True)
    _, raw = AgentToken.issue("bench", ["tools:invoke"])
    return raw


# The direct side as a program would call an API: one client, kept-alive connections.
DIRECT = httpx.Client(timeout=30)
# Like the executor: a fresh connection per call, one TLS context for the process.
FRESH_TLS = httpx.create_ssl_context()


def run_direct(url: str, n: int, delay: int, *, fresh: bool = False) -> float:
    started = time.perf_counter()
    if fresh:
        with httpx.Client(timeout=30, verify=FRESH_TLS) as client:
            response = client.get(f"{url}/item/{n}", params={"delay_ms": delay})
    else:
        response = DIRECT.get(f"{url}/item/{n}", params={"delay_ms": delay})
    data = response.json()
    elapsed = time.perf_counter() - started
    if data["data"]["id"] != n:
        raise SystemExit(f"the direct call gave {data}")
    return elapsed


def run_api(api: Api, n: int, delay: int, durations: list[float]) -> float:
    started = time.perf_counter()
    body = api.wait(api.invoke("lookup", {"n": n, "delay_ms": delay}))
    elapsed = time.perf_counter() - started
    if body["status"] != "succeeded" or body["result"]["structuredContent"]["id"] != n:
        raise SystemExit(f"the API run failed: {body['status']} {body['result']}")
    durations.append(body["duration"])
    return elapsed


def measure_end_to_end(api: Api, url: str, runs: int, delay: int) -> dict:
    for n in range(3):  # warm connections and both worker processes
        run_direct(url, n, delay)
        run_api(api, n, delay, [])
    direct, through_api, durations = [], [], []
    for n in range(runs):
        time.sleep(SETTLE_SECONDS)
        direct.append(run_direct(url, n, delay))
        time.sleep(SETTLE_SECONDS)
        through_api.append(run_api(api, n, delay, durations))
        ms = (direct[-1] * 1000, through_api[-1] * 1000)
        print(f"delay {delay:3d} ms run {n + 1:2d}: direct {ms[0]:7.1f} ms   api {ms[1]:7.1f} ms",
              flush=True)  # fmt: skip
    direct_median = statistics.median(direct)
    api_median = statistics.median(through_api)
    return {
        "server_delay_ms": delay,
        "direct_median_ms": round(direct_median * 1000, 1),
        "api_median_ms": round(api_median * 1000, 1),
        "ratio": round(api_median / direct_median, 3),
        "api_minus_direct_ms": round((api_median - direct_median) * 1000, 1),
        # The run record's duration: the time inside execute.perform on the worker.
        "worker_executor_median_ms": round(statistics.median(durations) * 1000, 1),
    }


def measure_executor(fake: FakeApi, runs: int) -> dict:
    """httptool.perform() in this process against the 0 ms server, next to httpx."""
    from tools_app.egress import config as egress_config
    from tools_app.http_tools import execute
    from tools_app.manifest import toolmd as manifest_toolmd

    manifest = manifest_toolmd.parse_toolmd(toolmd(fake.url)).manifest
    policy = egress_config.tool_policy([])
    artifacts = Path(tempfile.mkdtemp(prefix="bench-http-artifacts-"))
    perform, direct, handling = [], [], []
    try:
        for n in range(runs + 3):
            fake.handling.clear()
            values = execute.Values({"n": n}, {}, {})
            started = time.perf_counter()
            outcome = execute.perform(
                manifest, values, policy=policy, secrets={}, timeout=30,
                artifacts_dir=artifacts, on_update=lambda update: None,
                cancel=threading.Event(),
            )  # fmt: skip
            took = time.perf_counter() - started
            if outcome.status != "succeeded":
                raise SystemExit(f"perform failed: {outcome.result}")
            server = fake.handling[-1]
            direct_took = run_direct(fake.url, n, 0, fresh=True)
            if n >= 3:  # the first calls warm imports and caches
                perform.append(took)
                handling.append(server)
                direct.append(direct_took)
    finally:
        shutil.rmtree(artifacts, ignore_errors=True)
    perform_median = statistics.median(perform)
    direct_median = statistics.median(direct)
    server_median = statistics.median(handling)
    return {
        "executor_runs": runs,
        "executor_median_ms": round(perform_median * 1000, 2),
        "httpx_median_ms": round(direct_median * 1000, 2),
        "server_handling_median_ms": round(server_median * 1000, 2),
        # What httptool adds to a plain httpx call of the same URL: templates, egress
        # policy, retries bookkeeping, the cancel watcher, JMESPath mapping, redaction.
        "executor_overhead_ms": round((perform_median - direct_median) * 1000, 2),
        "executor_excluding_server_ms": round((perform_median - server_median) * 1000, 2),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=20, help="runs of each kind per delay")
    parser.add_argument("--delays", default="0,100", help="server delays in ms, e.g. 0,100")
    parser.add_argument("--broker", choices=("auto", "redis", "filesystem"), default="auto")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args()
    delays = [int(d) for d in args.delays.split(",") if d.strip()]

    fake = FakeApi()
    broker = pick_broker(args.broker)
    allow = {"CONSOLE_TOOL_NETWORK_ALLOW": fake.url[7:]}
    try:
        with Console("bench-http-tool-", broker, keep=args.keep, extra_env=allow) as console:
            token = prepare(fake.url)
            api = Api(console.start(), token)
            result: dict = {"broker": broker.split(":", 1)[0], "runs": args.runs}
            result["end_to_end"] = [measure_end_to_end(api, fake.url, args.runs, d) for d in delays]
            result |= measure_executor(fake, args.runs)
    finally:
        fake.close()
    report(result)
    return 0


def report(result: dict) -> None:
    print()
    print(f"broker {result['broker']}, {result['runs']} runs each (a shared machine: noisy)")
    for row in result["end_to_end"]:
        ok = "met" if row["ratio"] <= TARGET_RATIO else "MISSED"
        print(
            f"server delay {row['server_delay_ms']:3d} ms: httpx direct "
            f"{row['direct_median_ms']:7.1f} ms | through the API {row['api_median_ms']:7.1f} ms "
            f"(+{row['api_minus_direct_ms']} ms; executor on the worker "
            f"{row['worker_executor_median_ms']} ms) | ratio {row['ratio']:.2f} "
            f"(target <= {TARGET_RATIO}: {ok})"
        )
    print(
        f"executor in process: execute.perform {result['executor_median_ms']} ms vs httpx "
        "(fresh connection) "
        f"{result['httpx_median_ms']} ms for the same request (server handling "
        f"{result['server_handling_median_ms']} ms): overhead {result['executor_overhead_ms']} "
        f"ms per call; {result['executor_excluding_server_ms']} ms excluding the server"
    )
    print(json.dumps(result, sort_keys=True))


if __name__ == "__main__":
    sys.exit(main())
