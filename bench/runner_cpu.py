"""CPU per run of a trivial TypeScript tool through the runner (no console, no broker):
this process's CPU plus that of everything it started, sandboxes included (a cgroup v1
cpuacct group of its own, where it can make one: run it as root; else rusage, which
misses what the sandboxes' PID namespaces never reap).

    .venv/bin/python bench/runner_cpu.py [--runs 30] [--spares on|off]

Compare two checkouts by running it from each, alternately: the machine's load shows."""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path.cwd()))

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
    args = parser.parse_args()
    os.environ["TOOL_CONSOLE_SPARE_SANDBOXES"] = args.spares
    global GROUP
    GROUP = own_cpuacct()
    from tools_app.runner import Limits, RunRequest, run, standby

    with tempfile.TemporaryDirectory(prefix="bench-runner-cpu-") as folder:
        tool = Path(folder, "tool")
        tool.mkdir()
        (tool / "index.ts").write_text(TRIVIAL_TS)

        def once(n: int) -> None:
            request = RunRequest(
                tool_dir=tool,
                language="typescript",
                entry="index.ts",
                params={"n": n},
                tool_call_id="bench",
                env={},
                secrets={},
                limits=Limits(timeout=10),
                work_root=Path(folder, "runs", uuid.uuid4().hex),
            )
            outcome = run(request)
            assert outcome.result["content"][0]["text"] == f"ok {n}", outcome

        for n in range(3):
            once(n)
        time.sleep(1)
        before, started = cpu(), time.perf_counter()
        for n in range(args.runs):
            once(n)
            time.sleep(0.3)  # the next spare is started by then, its CPU counted
        standby.discard_spare()  # its CPU is reaped with it
        used, elapsed = cpu() - before, time.perf_counter() - started
    if GROUP is not None:  # back to the parent group, then the empty group can go
        (CPUACCT / "cgroup.procs").write_text(str(os.getpid()))
        GROUP.rmdir()
    how = "cpuacct" if GROUP else "rusage"
    print(
        f"spares {args.spares} ({how}): {1000 * used / args.runs:.1f} ms CPU per run "
        f"({args.runs} runs, {elapsed:.1f} s)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
