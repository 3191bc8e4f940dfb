"""CPU per run of a trivial TypeScript tool through the runner (no broker, no web server):
this process's CPU plus that of everything it started, sandboxes included (a cgroup v1
cpuacct group of its own, where it can make one: run it as root; else rusage, which
misses what the sandboxes' PID namespaces never reap).

    .venv/bin/python bench/runner_cpu.py [--runs 30] [--spares on|off] [--profile FILE]

Two sides, alternating run by run so the machine's load hits both alike: `runner`, the
runner alone (tools_app.runner.run), and `task`, what a Celery worker does for a run (the
Celery task tools_app.tasks.execute_run, called in this process on a throwaway SQLite
console: claim, materialize, runner, store the outcome), with its SQL statements counted.
The difference is the worker's own cost around the runner. `--profile FILE` writes a
cProfile of this process's main thread, both sides (the runner's own threads and the
sandboxes excluded), to FILE.

Compare two checkouts by running it from each, alternately: the machine's load shows."""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import resource
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path.cwd()))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchserver, invoke

TRIVIAL_TS = (
    "export async function execute(toolCallId: string, params: any) {\n"
    "  return { content: [{ type: 'text', text: `ok ${params.n}` }] };\n}\n"
)


CPUACCT = Path("/sys/fs/cgroup/cpuacct")


def own_cpuacct() -> Path | None:
    """A cpuacct group holding this process (and so what it starts), if one can be made."""
    group = CPUACCT / f"bench-runner-cpu-{os.getpid()}"
    try:
        group.mkdir()
        (group / "cgroup.procs").write_text(str(os.getpid()))
    except OSError:
        return None
    return group


GROUP: Path | None = None


def cpu() -> float:
    if GROUP is not None:
        return int((GROUP / "cpuacct.usage").read_text()) / 1e9
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--spares", choices=("on", "off"), default="on")
    parser.add_argument("--profile", type=Path, help="write a cProfile here")
    args = parser.parse_args()
    os.environ["TOOL_CONSOLE_SPARE_SANDBOXES"] = args.spares
    global GROUP
    GROUP = own_cpuacct()
    with tempfile.TemporaryDirectory(prefix="bench-runner-cpu-") as folder:
        once, queue = sides(Path(folder))
        for n in range(3):  # caches, connections, the first spare
            once["runner"](n)
            queue(n)
            once["task"](n)
        time.sleep(1)
        used = dict.fromkeys(once, 0.0)
        queries: list[int] = []
        profile = cProfile.Profile() if args.profile else None
        started = time.perf_counter()
        for n in range(args.runs):
            queue(n)
            for side, run_once in once.items():
                before = cpu()
                if profile is not None:
                    profile.enable()
                result = run_once(n)
                if profile is not None:
                    profile.disable()
                if result is not None:
                    queries.append(result)
                time.sleep(0.3)  # the next spare is started by then, its CPU counted
                used[side] += cpu() - before
        elapsed = time.perf_counter() - started
        from tools_app.runner import standby

        standby.discard_spare()  # its CPU is reaped with it
    if GROUP is not None:  # back to the parent group, then the empty group can go
        (CPUACCT / "cgroup.procs").write_text(str(os.getpid()))
        for _ in range(50):  # a discarded spare's last process may still be leaving
            try:
                GROUP.rmdir()
                break
            except OSError:
                time.sleep(0.1)
    if profile is not None:
        profile.dump_stats(args.profile)
    how = "cpuacct" if GROUP else "rusage"
    print(f"spares {args.spares} ({how}), {args.runs} runs of each side, {elapsed:.1f} s:")
    for side, seconds in used.items():
        print(f"  {side:6s} {1000 * seconds / args.runs:6.1f} ms CPU per run")
    worker_side = 1000 * (used["task"] - used["runner"]) / args.runs
    print(f"  task - runner (the worker's own work around the runner): {worker_side:.1f} ms")
    print(f"  SQL queries per task: {statistics.median(queries):g} (median)")
    return 0


def sides(
    folder: Path,
) -> tuple[dict[str, Callable[[int], int | None]], Callable[[int], None]]:
    """Run once through the runner alone, and once as the worker's task does."""
    from benchserver import console_env

    os.environ.update(console_env(folder / "console", web_workers=1))
    os.environ["CONSOLE_LOG_LEVEL"] = "ERROR"
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from tools_app import tasks
    from tools_app.audit import Actor
    from tools_app.models import Run, ToolVersion
    from tools_app.runner import Limits, RunRequest, run
    from tools_app.runs import start

    call_command("migrate", verbosity=0)
    call_command("signing_keys", "create", "--if-missing", stdout=io.StringIO())  # publishing signs
    from invoke import publish

    publish("trivial", TRIVIAL_TS)
    version = ToolVersion.objects.get(tool__name="trivial")
    tool = folder / "tool"
    tool.mkdir()
    (tool / "index.ts").write_text(TRIVIAL_TS)
    # Same limits and work folder as the task's runs: one spare shape serves both sides.
    limits = Limits(
        timeout=10,
        memory_mb=settings.RUNNER_MEMORY_MB,
        max_processes=settings.RUNNER_MAX_PROCESSES,
        disk_mb=settings.RUNNER_DISK_MB,
        cpus=settings.RUNNER_CPUS,
    )

    def runner_once(n: int) -> None:
        request = RunRequest(
            tool_dir=tool,
            language="typescript",
            entry="index.ts",
            params={"n": n},
            tool_call_id="bench",
            env={},
            secrets={},
            limits=limits,
            work_root=Path(settings.RUNS_WORK_PATH, uuid.uuid4().hex),
        )
        outcome = run(request)
        assert outcome.result["content"][0]["text"] == f"ok {n}", outcome

    queued: list[Run] = []

    def queue(n: int) -> None:  # the web server's part, not measured
        queued.append(
            start.start_run(version, {"n": n}, actor=Actor.system(), via="api", enqueue=False)
        )

    def task_once(n: int) -> int:
        run_id = queued.pop().pk
        with CaptureQueriesContext(connection) as captured:
            tasks.execute_run(str(run_id))  # the Celery task's body, in this process
        done = Run.objects.get(pk=run_id)
        assert done.result["content"][0]["text"] == f"ok {n}", done.result
        return len(captured.captured_queries)

    return {"runner": runner_once, "task": task_once}, queue


if __name__ == "__main__":
    raise SystemExit(main())
