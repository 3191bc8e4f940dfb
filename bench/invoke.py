"""Benchmark: a trivial TypeScript tool invoked end to end through the agent API, against
the same file run directly by the same Node binary with the runner's harness.

    .venv/bin/python bench/invoke.py [--runs 30] [--throughput-runs 100] [--broker auto]

Sets up a throwaway console (SQLite database, state dir and DATA_PATH in a temporary
folder), serves it with gunicorn (2 workers, console/gunicorn.conf.py) and starts a real
Celery worker with two worker processes, on Redis when one answers on 127.0.0.1:6379
(its own queue) and otherwise on the embedded filesystem broker. Then:

- direct: `node harness.mjs index.ts CONFIG` with the params on stdin, as the runner starts
  it, timed from spawn to exit;
- api: POST /api/v1/tools/trivial/invoke, then GET /api/v1/runs/<id>?wait=25 (long
  polling) until the run has ended, timed from the POST to the answer with the result.

Both are measured interleaved (`--runs` each) so drift in machine load hits them alike,
each after a pause that lets the worker finish starting its spare sandbox (see
tools_app/runner/standby.py), so neither is timed against that background work; the
medians and their ratio are reported (the warm ratio, target <= 1.0). Then
`--throughput-runs` invocations of a tool that sleeps 100 ms are queued at once, and the
runs per second the two worker processes sustain is reported, as a share of the 20 runs/s
the sleep alone allows (target >= 80%). Last, the worker is restarted with spare sandboxes
off (TOOL_CONSOLE_SPARE_SANDBOXES=off) and the latency measured again: every run then
starts its sandbox cold (the cold ratio, target <= 2.0). The summary's last three lines
give the three figures against their targets; the last line printed is a JSON object.

Before the throughput, what the secret-usage ledger and the metrics add to a warm run
(target < 2 ms at the median), side by side: `keyed`, the same trivial tool declaring an
integration with one secret (so each run reads it, writes a ledger row before it starts
and its outcome after), interleaved with `trivial`; and, in this process on the same
database, the ledger's own append + outcome and what metrics and JSON logs add to a run
(the request id middleware's bind, the run's three log lines). Metrics are counted from
the database when scraped (tools_app/ops/metrics.py): nothing per run.

The machine's other load shows in every figure: compare two checkouts by running them
back to back, several times in alternation."""

from __future__ import annotations

import argparse
import http.client
import io
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import datetime
from pathlib import Path

from benchserver import (
    REPO,
    celery_worker,
    console_env,
    free_port,
    start_gunicorn,
    stop,
    wait_until_up,
)

TARGET_RATIO = 1.0  # warm: through the API with a spare sandbox vs the bare node harness
COLD_TARGET_RATIO = 2.0  # spare sandboxes off
OVERHEAD_TARGET_MS = 2.0  # what the ledger and metrics may add to a warm run
TARGET_PERCENT_OF_IDEAL = 80.0  # throughput of the 100 ms tool
SLEEP_SECONDS = 0.1
WEB_WORKERS = 2
CELERY_PROCESSES = 2
LONG_POLL = 25
SETTLE_SECONDS = 0.4  # before each timed run: the worker's spare sandbox is started by then
PROTOCOL_FD = 3
REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/14")

TRIVIAL_TS = (
    "export async function execute(toolCallId: string, params: any) {\n"
    "  return { content: [{ type: 'text', text: `ok ${params.n}` }] };\n}\n"
)
SLEEP_TS = (
    "export async function execute(toolCallId: string, params: any) {\n"
    "  await new Promise((resolve) => setTimeout(resolve, 100));\n"
    "  return { content: [{ type: 'text', text: 'slept' }] };\n}\n"
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=30, help="runs of each kind")
    parser.add_argument("--throughput-runs", type=int, default=100)
    parser.add_argument("--broker", choices=("auto", "redis", "filesystem"), default="auto")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args()

    # The harness writes its protocol to fd 3: hold that number before any socket takes it.
    os.dup2(os.open(os.devnull, os.O_WRONLY), PROTOCOL_FD)
    broker = pick_broker(args.broker)
    with Console("bench-invoke-", broker, keep=args.keep) as console:
        token = prepare()
        api = Api(console.start(), token)
        result = {
            "broker": broker.split(":", 1)[0],
            **measure_latency(api, console.workdir, args.runs),
            **measure_overhead(api, args.runs),
            **measure_throughput(api, args.throughput_runs),
        }
        print("\nspare sandboxes off: every run starts cold", flush=True)
        console.replace_worker(TOOL_CONSOLE_SPARE_SANDBOXES="off")
        cold = measure_latency(api, console.workdir, args.runs)
        result.update(
            {
                "cold_direct_median_ms": cold["direct_median_ms"],
                "cold_api_median_ms": cold["api_median_ms"],
                "cold_ratio": cold["ratio"],
                "cold_api_phases_ms": cold["api_phases_ms"],
                "cold_spare_runs": cold["spare_runs"],
            }
        )
    report(result)
    return 0


class Console:
    """A throwaway console for a benchmark: `bench_env` in a temporary folder (also set in
    this process, for prepare()), then start() gunicorn and a worker. Leaving the `with`
    stops them and removes the folder (unless `keep`)."""

    def __init__(
        self, prefix: str, broker: str, *, keep: bool, extra_env: dict[str, str] | None = None
    ) -> None:
        self.workdir = Path(tempfile.mkdtemp(prefix=prefix))
        self.env = {**bench_env(self.workdir, broker), **(extra_env or {})}
        self.keep = keep
        self.processes: list[subprocess.Popen] = []
        os.environ.update(self.env)

    def __enter__(self) -> Console:
        return self

    def __exit__(self, *exc_info: object) -> None:
        for process in self.processes:
            stop(process)
        if not self.keep:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def start(self) -> int:
        """Start gunicorn and a worker; return the port once the console answers."""
        port = free_port()
        self.processes.append(
            start_gunicorn(self.env, port, self.workdir, workers=WEB_WORKERS, access_log=False)
        )
        self.worker = start_worker(self.env, self.workdir)
        self.processes.append(self.worker)
        wait_until_up(port, self.workdir)
        return port

    def replace_worker(self, **env: str) -> None:
        """Stop the worker and start another with `env` on top."""
        stop(self.worker)
        self.worker = start_worker({**self.env, **env}, self.workdir)
        self.processes.append(self.worker)


def pick_broker(choice: str) -> str:
    redis_up = port_open("127.0.0.1", 6379)
    if choice == "redis" and not redis_up:
        raise SystemExit("--broker redis: nothing answers on 127.0.0.1:6379")
    if choice == "redis" or (choice == "auto" and redis_up):
        return REDIS_URL
    return "filesystem://"


def port_open(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


def bench_env(workdir: Path, broker: str) -> dict[str, str]:
    return {
        **console_env(workdir, web_workers=WEB_WORKERS),
        "CELERY_BROKER_URL": broker,
        "CELERY_TASK_DEFAULT_QUEUE": f"bench-{uuid.uuid4().hex[:8]}",
    }


def prepare() -> str:
    """Migrate, publish the two tools, return a tools:invoke token."""
    sys.path.insert(0, str(REPO))
    import django

    django.setup()
    from django.core.management import call_command

    from tools_app.models import AgentToken

    call_command("migrate", verbosity=0)
    call_command("signing_keys", "create", "--if-missing", stdout=io.StringIO())  # publishing signs
    publish("trivial", TRIVIAL_TS)
    publish("sleepy", SLEEP_TS)
    from django.conf import settings

    from tools_app.audit import Actor
    from tools_app.integrations.service import create_integration

    # The bench's seed folder is empty: give it the shipped type the `keyed` tool uses.
    types = Path(settings.SEED_PATH) / "integrations"
    types.mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / "seed" / "integrations" / "openai.yaml", types)
    create_integration(
        "benchkey", "openai", actor=Actor.system(), secrets={"api_key": "sk-bench-not-secret"}
    )
    publish("keyed", TRIVIAL_TS, integrations=("benchkey",))
    _, raw = AgentToken.issue("bench", ["tools:invoke"])
    return raw


def publish(name: str, source: str = TRIVIAL_TS, integrations: tuple[str, ...] = ()) -> None:
    """Save and publish a TypeScript tool taking an optional integer `n` (after django.setup())."""
    from tools_app.audit import Actor
    from tools_app.catalog.versions import save_version

    declared = f"integrations: [{', '.join(integrations)}]\n" if integrations else ""
    toolmd = (
        f"---\nname: {name}\ndescription: Benchmark tool {name}.\nlanguage: typescript\n"
        f"{declared}"
        "inputs:\n  n:\n    type: integer\n    description: A number.\n"
        "    optional: true\n---\n\n# Bench\n"
    )
    files = {"TOOL.md": toolmd.encode(), "index.ts": source.encode()}
    save_version(name, files, actor=Actor.system(), publish=True)


def start_worker(env: dict[str, str], workdir: Path) -> subprocess.Popen:
    quiet = ("--without-gossip", "--without-mingle", "--without-heartbeat")
    return celery_worker(env, workdir / "worker.log", *quiet, concurrency=CELERY_PROCESSES)


class Api:
    """One keep-alive connection to the agent API."""

    def __init__(self, port: int, token: str) -> None:
        self.port = port
        self.headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

    def call(self, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
        data = json.dumps(body).encode() if body is not None else None
        for attempt in (1, 2):
            try:
                self.conn.request(method, path, body=data, headers=self.headers)
                response = self.conn.getresponse()
                payload = response.read()
                break
            except (http.client.HTTPException, ConnectionError):
                self.conn.close()
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
                if attempt == 2:
                    raise
        if response.getheader("Connection", "").lower() == "close":
            self.conn.close()
            self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        return response.status, json.loads(payload)

    def invoke(self, tool: str, params: dict) -> str:
        status, body = self.call("POST", f"/api/v1/tools/{tool}/invoke", {"params": params})
        if status != 202:
            raise SystemExit(f"invoke answered {status}: {body}")
        return body["run"]

    def wait(self, run_id: str, timeout: float = 120) -> dict:
        """Long-poll (?wait=) until the run has ended, as an agent would."""
        deadline = time.monotonic() + timeout
        after = 0
        while time.monotonic() < deadline:
            _, body = self.call("GET", f"/api/v1/runs/{run_id}?wait={LONG_POLL}&after={after}")
            if body["status"] not in ("queued", "running"):
                return body
            after = max([after, *(update["seq"] for update in body["updates"])])
        raise SystemExit(f"run {run_id} did not end within {timeout} s (is the worker up?)")


def direct_command(workdir: Path) -> tuple[list[str], Path]:
    """The runner's own Node command line for the tool, outside any sandbox."""
    from tools_app.runner import Limits, sandbox

    tool_dir = workdir / "direct" / "tool"
    tool_dir.mkdir(parents=True, exist_ok=True)
    (tool_dir / "index.ts").write_text(TRIVIAL_TS)
    paths = sandbox.tool_paths("process", tool_dir, workdir / "direct", workdir / "direct")
    return sandbox.tool_argv("typescript", "index.ts", paths, Limits()), workdir / "direct"


def run_direct(argv: list[str], folder: Path, n: int) -> float:
    """Spawn to exit of `node harness.mjs index.ts CONFIG`; the harness reports on fd 3."""
    protocol = folder / "protocol.jsonl"
    fd = os.open(protocol, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(fd, PROTOCOL_FD)  # fd 3 is reserved at start-up, never a socket's
    os.close(fd)
    started = time.perf_counter()
    subprocess.run(
        argv,
        input=json.dumps({"n": n}).encode(),
        stdout=subprocess.DEVNULL,
        pass_fds=(PROTOCOL_FD,),
        check=True,
        cwd=folder,
    )
    elapsed = time.perf_counter() - started
    if f"ok {n}" not in protocol.read_text():
        raise SystemExit(f"the direct run gave no result: {protocol.read_text()[:300]}")
    return elapsed


def run_api(
    api: Api, n: int, phases: dict[str, list[float]] | None = None, tool: str = "trivial"
) -> float:
    started = time.perf_counter()
    body = api.wait(api.invoke(tool, {"n": n}))
    elapsed = time.perf_counter() - started
    if body["status"] != "succeeded" or body["result"]["content"][0]["text"] != f"ok {n}":
        raise SystemExit(f"the API run failed: {body['status']} {body['result']}")
    if phases is not None:
        # Where the time went, from the run record's own timestamps.
        created, begun, ended = (
            datetime.fromisoformat(body[key]) for key in ("created_at", "started_at", "finished_at")
        )
        phases["queue"].append((begun - created).total_seconds())
        phases["worker"].append((ended - begun).total_seconds())
        phases["runner"].append(body["duration"])
        phases["spare"].append(1.0 if body["spare"] else 0.0)
    return elapsed


def measure_latency(api: Api, workdir: Path, runs: int) -> dict:
    argv, folder = direct_command(workdir)
    for n in range(3):  # warm caches, connections and both worker processes
        run_direct(argv, folder, n)
        run_api(api, n)
    direct, through_api = [], []
    phases: dict[str, list[float]] = {"queue": [], "worker": [], "runner": [], "spare": []}
    for n in range(runs):
        time.sleep(SETTLE_SECONDS)
        direct.append(run_direct(argv, folder, n))
        time.sleep(SETTLE_SECONDS)
        through_api.append(run_api(api, n, phases))
        ms = (direct[-1] * 1000, through_api[-1] * 1000)
        print(f"run {n + 1:2d}: direct {ms[0]:7.1f} ms   api {ms[1]:7.1f} ms", flush=True)
    isolation = api.wait(api.invoke("trivial", {"n": 0}))["isolation"]
    direct_median = statistics.median(direct)
    api_median = statistics.median(through_api)
    return {
        "runs": runs,
        "isolation": isolation,
        "direct_median_ms": round(direct_median * 1000, 1),
        "api_median_ms": round(api_median * 1000, 1),
        "ratio": round(api_median / direct_median, 3),
        "target_ratio": TARGET_RATIO,
        # How many API runs started in a spare sandbox (the worker's warm start).
        "spare_runs": int(sum(phases.pop("spare"))),
        # Medians: created -> claimed by a worker, claimed -> stored, the runner's own time.
        "api_phases_ms": {
            name: round(statistics.median(values) * 1000, 1) for name, values in phases.items()
        },
    }


def measure_overhead(api: Api, runs: int) -> dict:
    """What the ledger and the metrics add to a warm run (see the module docstring)."""
    print("\nwarm runs without and with a secret (a ledger row each)", flush=True)
    for n in range(3):
        run_api(api, n, tool="keyed")
    plain, keyed = [], []
    for n in range(runs):
        time.sleep(SETTLE_SECONDS)
        plain.append(run_api(api, n))
        time.sleep(SETTLE_SECONDS)
        keyed.append(run_api(api, n, tool="keyed"))
        ms = (plain[-1] * 1000, keyed[-1] * 1000)
        print(f"run {n + 1:2d}: trivial {ms[0]:7.1f} ms   keyed {ms[1]:7.1f} ms", flush=True)
    ledger_ms = ledger_append_ms(200)
    metrics_ms = run_observability_ms(2000)
    return {
        "trivial_median_ms": round(statistics.median(plain) * 1000, 1),
        "keyed_median_ms": round(statistics.median(keyed) * 1000, 1),
        "ledger_append_median_ms": round(ledger_ms, 3),
        "metrics_and_logs_median_ms": round(metrics_ms, 3),
        "overhead_target_ms": OVERHEAD_TARGET_MS,
    }


def ledger_append_ms(count: int) -> float:
    """Median of the ledger's append (row + chain head) and its outcome UPDATE for one run
    with one secret, on the bench's database, as the worker makes them."""
    from tools_app.audit import Actor
    from tools_app.integrations import ledger
    from tools_app.integrations.environment import Delivered
    from tools_app.models import Integration, Tool
    from tools_app.models.runs import RunVia
    from tools_app.runs import start

    tool = Tool.objects.get(name="keyed")
    run = start.start_run(
        tool.published_version, {}, actor=Actor.system(), via=RunVia.API, enqueue=False
    )
    integration = Integration.objects.get(slug="benchkey")
    delivered = [Delivered("benchkey", integration.pk, ("api_key",), ("",), ("sk-bench",))]
    times = []
    for _ in range(count):
        started = time.perf_counter()
        grant = ledger.append(run, delivered)
        ledger.record_outcome(grant, "succeeded")
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def run_observability_ms(count: int) -> float:
    """Median of what JSON logs and the request id add to one run: the web's bind and
    "queued" line, the worker's bind, "received" and "done" lines, and clears."""
    import logging

    from tools_app.ops import logcontext

    logger = logging.getLogger("bench.invoke.logs")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    handler = logging.StreamHandler(io.StringIO())
    handler.setFormatter(logcontext.JsonFormatter())
    handler.addFilter(logcontext.ContextFilter())
    logger.handlers = [handler]
    run_id, request_id = uuid.uuid4(), uuid.uuid4().hex
    times = []
    for _ in range(count):
        started = time.perf_counter()
        logcontext.bind(request=request_id)
        logger.info("run %s queued: %s v%s via %s", run_id, "trivial", 1, "api")
        logcontext.clear()
        logcontext.bind(request=request_id, run=str(run_id))
        logger.info("run %s received", run_id)
        logger.info("run %s done in %.0f ms", run_id, 12.0)
        logcontext.clear()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def measure_throughput(api: Api, count: int) -> dict:
    """Queue `count` runs of the 100 ms tool at once; runs per second until the last ends."""
    started = time.perf_counter()
    ids = [api.invoke("sleepy", {}) for _ in range(count)]
    queued = time.perf_counter() - started
    statuses = [api.wait(run_id, timeout=300)["status"] for run_id in ids]
    elapsed = time.perf_counter() - started
    if any(status != "succeeded" for status in statuses):
        raise SystemExit(f"throughput runs failed: {statuses}")
    return {
        "throughput_runs": count,
        "throughput_worker_processes": CELERY_PROCESSES,
        "throughput_seconds": round(elapsed, 2),
        "throughput_queue_seconds": round(queued, 2),
        "runs_per_second": round(count / elapsed, 2),
        "ideal_runs_per_second": round(CELERY_PROCESSES / SLEEP_SECONDS, 1),
        "percent_of_ideal": round(100 * count / elapsed * SLEEP_SECONDS / CELERY_PROCESSES, 1),
        "target_percent_of_ideal": TARGET_PERCENT_OF_IDEAL,
    }


def report(result: dict) -> None:
    ok = result["ratio"] <= TARGET_RATIO
    cold_ok = result["cold_ratio"] <= COLD_TARGET_RATIO
    share_ok = result["percent_of_ideal"] >= TARGET_PERCENT_OF_IDEAL
    print()
    print(f"broker {result['broker']}, isolation {result['isolation']}, {result['runs']} runs each")
    print(f"direct node harness   median {result['direct_median_ms']:7.1f} ms")
    print(
        f"through the agent API median {result['api_median_ms']:7.1f} ms "
        f"({result['spare_runs']} of {result['runs']} runs started in a spare sandbox)"
    )
    phases = result["api_phases_ms"]
    print(
        f"  of which: queued {phases['queue']} ms, on the worker {phases['worker']} ms "
        f"(the runner {phases['runner']} ms)"
    )
    print(
        f"spare sandboxes off (cold starts): direct {result['cold_direct_median_ms']} ms, "
        f"API {result['cold_api_median_ms']} ms, ratio {result['cold_ratio']:.2f} "
        f"(phases {result['cold_api_phases_ms']})"
    )
    print(
        f"100 ms tool on {result['throughput_worker_processes']} worker processes: "
        f"{result['runs_per_second']:.2f} runs/s ({result['throughput_runs']} runs in "
        f"{result['throughput_seconds']} s; at most {result['ideal_runs_per_second']} "
        "if runs cost nothing but the sleep)"
    )
    added = result["ledger_append_median_ms"] + result["metrics_and_logs_median_ms"]
    added_ok = added < OVERHEAD_TARGET_MS
    print(
        f"warm runs: trivial {result['trivial_median_ms']} ms, keyed (a secret and its ledger "
        f"row) {result['keyed_median_ms']} ms; in this process: ledger append + outcome "
        f"{result['ledger_append_median_ms']:.3f} ms, metrics and logs "
        f"{result['metrics_and_logs_median_ms']:.3f} ms a run"
    )
    print()
    print(
        f"ledger + metrics  {added:.2f} ms a warm run (target < {OVERHEAD_TARGET_MS:g} ms: "
        f"{verdict(added_ok)})"
    )
    print(
        f"throughput  {result['runs_per_second']:.2f} runs/s = {result['percent_of_ideal']}% "
        f"of ideal (target >= {TARGET_PERCENT_OF_IDEAL:g}%: {verdict(share_ok)})"
    )
    print(f"warm ratio  {result['ratio']:.2f} (target <= {TARGET_RATIO}: {verdict(ok)})")
    print(
        f"cold ratio  {result['cold_ratio']:.2f} (target <= {COLD_TARGET_RATIO}: "
        f"{verdict(cold_ok)})"
    )
    result["cold_target_ratio"] = COLD_TARGET_RATIO
    print(json.dumps(result, sort_keys=True))


def verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


if __name__ == "__main__":
    sys.exit(main())
