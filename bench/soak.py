"""Soak: N concurrent agent-API clients invoke a trivial tool for a fixed number of runs
against gunicorn and a real Celery worker, once on the embedded (filesystem) broker and
once on Redis.

    .venv/bin/python bench/soak.py [--clients 12] [--runs 500] [--broker both] [--kill-worker]

Each client loops: POST /api/v1/tools/trivial/invoke, then long-poll GET /api/v1/runs/<id>
until the run ends (or --give-up seconds pass), timing invoke to final answer. Printed per
broker: throughput (runs ended per second), p50/p95/p99 end-to-end latency of the runs
that succeeded, and how many runs ended in each status ("queued"/"running" are runs that
never reached a final state within --give-up: a failure of the soak).

--kill-worker SIGKILLs the worker (its whole process group, tools included) when half of
the runs have been invoked, and starts it again: every run must still end in a final
state. A run the dead worker was running turns `lost` when a client polls it
CONSOLE_RUN_LOST_AFTER_SECONDS (5 here) after its last heartbeat. A run the dead worker
had taken off the queue (prefetched, or claimed in the embedded broker) but not started
stays `queued` until the queued-run timeout: the reaper (here: the API poll, which reaps
the run it shows) re-sends it after CONSOLE_RUN_QUEUED_TIMEOUT_SECONDS (15 here, 600 by
default) and the restarted worker runs it, or it turns `lost` a timeout later. So a
client waits up to --give-up (90 s, over twice that timeout) for a final state.

Throwaway console as bench/invoke.py makes it (SQLite, its own state dir and queue). The
last line printed is a JSON object: {"embedded": {...}, "redis": {...}, "ok": bool}.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

from benchserver import (
    celery_worker,
    console_env,
    free_port,
    kill,
    start_gunicorn,
    stop,
    wait_until_up,
)
from invoke import REDIS_URL, Api, port_open, prepare

WEB_WORKERS = 2
CELERY_PROCESSES = 2
POLL_WAIT = 5
LOST_AFTER = 5
# Longer than a run normally waits in the queue here (about 2 s), short enough that the
# runs a killed worker took with it are re-sent within the soak.
QUEUED_TIMEOUT = 15
FINAL = {"succeeded", "failed", "cancelled", "timed_out", "lost"}


def start_worker(env: dict[str, str], workdir: Path, name: str) -> subprocess.Popen:
    node = f"{name}-{uuid.uuid4().hex[:6]}@%h"
    log = workdir / f"{name}.log"
    return celery_worker(env, log, "-n", node, concurrency=CELERY_PROCESSES, append=True)


class Soak:
    def __init__(self, api_port: int, token: str, runs: int, give_up: float) -> None:
        self.port, self.token, self.runs, self.give_up = api_port, token, runs, give_up
        self.lock = threading.Lock()
        self.invoked = 0
        self.half = threading.Event()
        self.results: list[tuple[str, float]] = []  # (final status, seconds)
        self.errors: list[str] = []

    def next_run(self) -> int | None:
        with self.lock:
            if self.invoked >= self.runs:
                return None
            self.invoked += 1
            if self.invoked >= self.runs // 2:
                self.half.set()
            return self.invoked

    def client(self) -> None:
        api = Api(self.port, self.token)
        while (n := self.next_run()) is not None:
            started = time.perf_counter()
            try:
                run_id = api.invoke("trivial", {"n": n})
                status = self.wait(api, run_id)
            except (SystemExit, OSError, ValueError) as exc:  # report, keep soaking
                with self.lock:
                    self.errors.append(f"{type(exc).__name__}: {exc}"[:200])
                status = "client error"
            with self.lock:
                self.results.append((status, time.perf_counter() - started))

    def wait(self, api: Api, run_id: str) -> str:
        deadline = time.monotonic() + self.give_up
        status = "queued"
        while time.monotonic() < deadline:
            _, body = api.call("GET", f"/api/v1/runs/{run_id}?wait={POLL_WAIT}")
            status = body["status"]
            if status in FINAL:
                return status
        return status  # never ended: counted as is


def soak_once(args, broker: str, env: dict, workdir: Path, token: str) -> dict:
    env = {
        **env,
        "CELERY_BROKER_URL": broker,
        "CELERY_TASK_DEFAULT_QUEUE": f"soak-{uuid.uuid4().hex[:8]}",
    }
    port = free_port()
    web = start_gunicorn(env, port, workdir, workers=WEB_WORKERS, access_log=False)
    workers = [start_worker(env, workdir, "worker")]
    killed_at = None
    try:
        wait_until_up(port, workdir)
        soak = Soak(port, token, args.runs, args.give_up)
        threads = [threading.Thread(target=soak.client) for _ in range(args.clients)]
        started = time.perf_counter()
        for thread in threads:
            thread.start()
        if args.kill_worker:
            soak.half.wait()
            kill(workers[-1])
            killed_at = round(time.perf_counter() - started, 2)
            print(f"  SIGKILLed the worker after {killed_at} s; starting it again", flush=True)
            workers.append(start_worker(env, workdir, "worker"))
        for thread in threads:
            thread.join()
        elapsed = time.perf_counter() - started
    finally:
        stop(web)
        for worker in workers:
            stop(worker)
    counts = Counter(status for status, _ in soak.results)
    ok_times = sorted(seconds for status, seconds in soak.results if status == "succeeded")

    def pct(q: float) -> float | None:
        if not ok_times:
            return None
        return round(ok_times[min(len(ok_times) - 1, int(q * len(ok_times)))] * 1000, 1)

    unfinished = sum(n for status, n in counts.items() if status not in FINAL)
    return {
        "broker": broker.split(":", 1)[0],
        "clients": args.clients,
        "runs": args.runs,
        "kill_worker": args.kill_worker,
        "killed_at_s": killed_at,
        "seconds": round(elapsed, 2),
        "runs_per_second": round(len(soak.results) / elapsed, 2),
        "latency_ms": {
            "p50": pct(0.50),
            "p95": pct(0.95),
            "p99": pct(0.99),
            "mean": round(statistics.mean(ok_times) * 1000, 1) if ok_times else None,
        },
        "statuses": dict(sorted(counts.items())),
        "unfinished": unfinished,
        "client_errors": soak.errors[:5],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, default=12)
    parser.add_argument("--runs", type=int, default=500)
    parser.add_argument("--broker", choices=("both", "embedded", "redis"), default="both")
    parser.add_argument("--kill-worker", action="store_true")
    parser.add_argument(
        "--give-up", type=float, default=90, help="seconds a client waits for one run to end"
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args()

    os.dup2(os.open(os.devnull, os.O_WRONLY), 3)  # as bench/invoke.py: fd 3 stays a file
    brokers = []
    if args.broker in ("both", "embedded"):
        brokers.append(("embedded", "filesystem://"))
    if args.broker in ("both", "redis"):
        if not port_open("127.0.0.1", 6379):
            raise SystemExit("Redis does not answer on 127.0.0.1:6379")
        brokers.append(("redis", REDIS_URL))
    workdir = Path(tempfile.mkdtemp(prefix="bench-soak-"))
    env = {
        **console_env(workdir, web_workers=WEB_WORKERS),
        "CONSOLE_RUN_LOST_AFTER_SECONDS": str(LOST_AFTER),
        "CONSOLE_RUN_HEARTBEAT_SECONDS": "1",
        "CONSOLE_RUN_QUEUED_TIMEOUT_SECONDS": str(QUEUED_TIMEOUT),
    }
    os.environ.update(env)
    result: dict = {}
    try:
        token = prepare()
        for name, broker in brokers:
            print(f"{name} broker: {args.clients} clients, {args.runs} runs", flush=True)
            result[name] = soak_once(args, broker, env, workdir, token)
            one = result[name]
            print(
                f"  {one['runs_per_second']} runs/s, latency p50 {one['latency_ms']['p50']} ms "
                f"p95 {one['latency_ms']['p95']} ms p99 {one['latency_ms']['p99']} ms, "
                f"statuses {one['statuses']}",
                flush=True,
            )
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    result["ok"] = all(r["unfinished"] == 0 and not r["client_errors"] for r in result.values())
    print(json.dumps(result, sort_keys=True))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
