"""Benchmark: replaying 50 cases of a trivial TypeScript tool (one check, the runs queued at
once on a worker with two processes) against the same 50 runs through the agent API one
after another (invoke, long-poll until it ended, then the next), as a CI script without
cases would.

    .venv/bin/python bench/cases.py [--cases 50] [--rounds 3] [--broker auto]

Sets up a throwaway console like bench/invoke.py (SQLite, gunicorn with 2 workers, a real
Celery worker with 2 processes, Redis when one answers on 127.0.0.1:6379). The replay is
timed from start_check() (tools_app/runs/replay.py, what the page, the API and
`test_tools --worker` call) to the moment wait() sees every case evaluated: the worker
evaluates each case when its run ends. Both are measured `--rounds` times, alternating, so
drift in machine load hits them alike; the medians and their ratio are reported (the
speed-up, target >= 1.6: the two worker processes run cases side by side, and a case's
result is stored by the worker instead of fetched by a client). The last line printed is
a JSON object. Beside each figure, how busy the machine's CPUs were meanwhile: with two
CPUs a trivial run's own CPU (its sandbox, node, the worker's bookkeeping) already keeps
them busy most of the time in the sequential runs, which bounds what parallel replay
can gain; the target assumes CPUs to spare for the two worker processes."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

from invoke import SETTLE_SECONDS, Api, Console, pick_broker, prepare

TARGET_SPEEDUP = 1.6


def cpu_jiffies() -> tuple[int, int]:
    """(busy, total) jiffies of the whole machine (Linux /proc/stat), to say whether a
    figure was bound by the CPUs rather than by the console."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    return sum(values) - values[3] - values[4], sum(values)


def timed(fn, *args) -> tuple[float, float]:
    """(wall seconds, share of the machine's CPUs busy meanwhile) of fn(*args)."""
    busy, total = cpu_jiffies()
    seconds = fn(*args)
    busy_after, total_after = cpu_jiffies()
    return seconds, (busy_after - busy) / max(1, total_after - total)


def cases_yaml(count: int) -> str:
    lines = ["cases:"]
    for n in range(count):
        lines += [
            f"  - name: ok_{n}",
            f"    inputs: {{n: {n}}}",
            "    expect:",
            f'      - text: "ok {n}"',
            "      - is_error: false",
        ]
    return "\n".join(lines) + "\n"


def with_cases(count: int):
    """A new version of `trivial` holding `count` cases (after django.setup())."""
    from tools_app.audit import Actor
    from tools_app.catalog.versions import save_version
    from tools_app.models import Tool

    latest = Tool.objects.get(name="trivial").versions.order_by("-number").first()
    files = {**latest.file_bytes(), "cases.yaml": cases_yaml(count).encode()}
    return save_version("trivial", files, actor=Actor.system(), publish=True).version


def replay_once(version, count: int) -> float:
    from tools_app.audit import Actor
    from tools_app.models.runs import RunVia
    from tools_app.runs import replay

    started = time.perf_counter()
    check = replay.start_check(version, actor=Actor.system(), via=RunVia.API)
    check = replay.wait(check, 300)
    elapsed = time.perf_counter() - started
    if check.status != "passed" or check.passed != count:
        raise SystemExit(f"the replay did not pass: {json.dumps(replay.check_json(check))[:2000]}")
    return elapsed


def sequential_once(api: Api, count: int) -> float:
    started = time.perf_counter()
    for n in range(count):
        body = api.wait(api.invoke("trivial", {"n": n}))
        if body["status"] != "succeeded" or body["result"]["content"][0]["text"] != f"ok {n}":
            raise SystemExit(f"API run {n} failed: {body['status']} {body['result']}")
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--broker", choices=("auto", "redis", "filesystem"), default="auto")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    parser.add_argument(
        "--database-url", help="an empty database to use instead of SQLite (e.g. PostgreSQL)"
    )
    args = parser.parse_args()

    broker = pick_broker(args.broker)
    extra = {"DATABASE_URL": args.database_url} if args.database_url else {}
    with Console("bench-cases-", broker, keep=args.keep, extra_env=extra) as console:
        token = prepare()
        version = with_cases(args.cases)
        api = Api(console.start(), token)
        # Warm caches, connections, both worker processes and their spare sandboxes.
        sequential_once(api, 4)
        replay_once(with_cases(4), 4)
        replays, sequential, busy = [], [], []
        for round_ in range(args.rounds):
            time.sleep(SETTLE_SECONDS)
            seconds, share = timed(sequential_once, api, args.cases)
            sequential.append(seconds)
            time.sleep(SETTLE_SECONDS)
            seconds, replay_share = timed(replay_once, version, args.cases)
            replays.append(seconds)
            busy.append((share, replay_share))
            print(
                f"round {round_ + 1}: {args.cases} sequential API runs {sequential[-1]:6.2f} s"
                f" (CPUs {share:4.0%} busy)   replay of {args.cases} cases {replays[-1]:6.2f} s"
                f" (CPUs {replay_share:4.0%} busy)",
                flush=True,
            )
    replay_s, sequential_s = statistics.median(replays), statistics.median(sequential)
    speedup = sequential_s / replay_s
    result = {
        "broker": broker.split(":", 1)[0],
        "database": (args.database_url or "sqlite").split(":", 1)[0],
        "cases": args.cases,
        "rounds": args.rounds,
        "worker_processes": 2,
        "sequential_api_seconds": round(sequential_s, 3),
        "replay_seconds": round(replay_s, 3),
        "speedup": round(speedup, 2),
        "cpus": os.cpu_count(),
        "sequential_cpu_busy": round(statistics.median(b for b, _ in busy), 2),
        "replay_cpu_busy": round(statistics.median(r for _, r in busy), 2),
        "target_speedup": TARGET_SPEEDUP,
    }
    print()
    print(f"{args.cases} sequential API runs   median {sequential_s:6.2f} s")
    print(f"replay of {args.cases} cases      median {replay_s:6.2f} s")
    ok = speedup >= TARGET_SPEEDUP
    print(f"speed-up    {speedup:.2f}x (target >= {TARGET_SPEEDUP}: {'ok' if ok else 'MISSED'})")
    if result["replay_cpu_busy"] >= 0.9:
        print(
            f"  the replay kept the machine's {os.cpu_count()} CPU(s) "
            f"{result['replay_cpu_busy']:.0%} busy: bound by the CPUs, not by the worker pool"
        )
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
