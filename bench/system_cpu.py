"""Where the machine's CPU goes per run of bench/invoke.py's throughput phase (the 100 ms
TypeScript tool, `--runs` queued at once through the agent API, 2 worker processes).

    .venv/bin/python bench/system_cpu.py [--runs 100] [--broker redis]

Run as root: gunicorn (master and workers), the Celery worker (main process and pool
processes, with every sandbox they start) and this process each get a cgroup v1 cpuacct
group of their own for the phase. The pool processes' own CPU (utime + stime, children
excluded) is the worker's Python; the rest of the Celery group is the sandboxes (bwrap,
the gate, node, teardown) and the main process. Redis is read from /proc/PID/stat and the
whole machine from /proc/stat (other load on the machine shows there: compare "other")."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from pathlib import Path

from invoke import Api, Console, measure_throughput, pick_broker, prepare, run_api

CPUACCT = Path("/sys/fs/cgroup/cpuacct")
TICK = os.sysconf("SC_CLK_TCK")


def tree(pid: int) -> list[int]:
    """`pid` and its descendants."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo += children.get(current, [])
    return found


def own_cpu(pid: int) -> float:
    """utime + stime of one process, without its children (seconds)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def machine_cpu() -> float:
    """Busy CPU seconds of the machine (all but idle and iowait)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    return (sum(fields) - fields[3] - fields[4]) / TICK


class Group:
    def __init__(self, name: str, pids: list[int]) -> None:
        self.path = CPUACCT / f"bench-system-cpu-{name}-{os.getpid()}"
        self.path.mkdir()
        for pid in pids:
            (self.path / "cgroup.procs").write_text(str(pid))

    def used(self) -> float:
        return int((self.path / "cpuacct.usage").read_text()) / 1e9

    def remove(self) -> None:
        for pid in (self.path / "cgroup.procs").read_text().split():
            with contextlib.suppress(OSError):
                (CPUACCT / "cgroup.procs").write_text(pid)
        for _ in range(50):
            try:
                self.path.rmdir()
                return
            except OSError:
                time.sleep(0.1)


def redis_pid() -> int | None:
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() == "redis-server":
                    return int(entry.name)
            except OSError:
                continue
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--broker", choices=("auto", "redis", "filesystem"), default="redis")
    args = parser.parse_args()
    os.dup2(os.open(os.devnull, os.O_WRONLY), 3)
    broker = pick_broker(args.broker)
    with Console("bench-system-cpu-", broker, keep=False) as console:
        api = Api(console.start(), prepare())
        for n in range(4):  # both pool processes warm, spares started
            run_api(api, n)
        time.sleep(1)
        gunicorn, worker = console.processes[0].pid, console.worker.pid
        groups = {
            "gunicorn": Group("gunicorn", tree(gunicorn)),
            "celery": Group("celery", tree(worker)),
            "bench": Group("bench", [os.getpid()]),
        }
        pool = [pid for pid in tree(worker) if pid != worker and _is_python(pid)]
        redis = redis_pid() if broker.startswith("redis") else None
        before = {name: group.used() for name, group in groups.items()}
        pool_before = sum(own_cpu(pid) for pid in pool)
        main_before = own_cpu(worker)
        redis_before = own_cpu(redis) if redis else 0.0
        machine_before, load_before = machine_cpu(), Path("/proc/loadavg").read_text().strip()
        result = measure_throughput(api, args.runs)
        time.sleep(1.5)  # the last teardowns and spares
        used = {name: group.used() - before[name] for name, group in groups.items()}
        pool_used = sum(own_cpu(pid) for pid in pool) - pool_before
        main_used = own_cpu(worker) - main_before
        redis_used = (own_cpu(redis) - redis_before) if redis else 0.0
        machine = machine_cpu() - machine_before
        for group in groups.values():
            group.remove()
    per = 1000 / args.runs
    rows = [
        ("gunicorn (invoke POST + long polls)", used["gunicorn"]),
        ("celery pool processes' Python (task, DB, runner)", pool_used),
        ("celery main process", main_used),
        ("sandboxes (bwrap, gate, node, ...)", used["celery"] - pool_used - main_used),
        ("bench client", used["bench"]),
        ("redis-server", redis_used),
    ]
    accounted = sum(value for _, value in rows)
    rows.append(("other (rest of the machine)", machine - accounted))
    print(f"\nload before: {load_before}; after: {Path('/proc/loadavg').read_text().strip()}")
    print(
        f"{args.runs} runs at {result['runs_per_second']} runs/s "
        f"({result['percent_of_ideal']}% of ideal)"
    )
    for name, value in rows:
        print(f"  {name:50s} {value * per:7.1f} ms CPU per run")
    print(f"  {'machine total (/proc/stat)':50s} {machine * per:7.1f} ms CPU per run")
    return 0


def _is_python(pid: int) -> bool:
    try:
        return "python" in os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return False


if __name__ == "__main__":
    sys.exit(main())
