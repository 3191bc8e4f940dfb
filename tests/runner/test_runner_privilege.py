"""The trust boundary between a tool and the host (docs/runs.md): tool code never runs
as root, kernel settings are read-only, a seccomp filter denies the kernel's escape
hatches, writes are capped by a disk quota, nothing a tool detaches survives its run, and
a root worker without bubblewrap refuses to run tools."""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from tests.support import prerequisite, require, unprivileged
from tools_app.audit import Actor
from tools_app.models.runs import RunStatus, RunVia
from tools_app.runner import (
    CANCELLED,
    FAILED,
    SUCCEEDED,
    Limits,
    RunOutcome,
    RunRequest,
    isolation_level,
    quota,
    run,
    standby,
    teardown,
)
from tools_app.runs import execute as run_execute
from tools_app.runs import start

ENTRY = {
    "typescript": "index.ts",
    "javascript": "index.js",
    "python": "index.py",
    "bash": "index.sh",
}
FAST = Limits(timeout=20, grace_seconds=1)
ROOT = os.geteuid() == 0


@pytest.fixture(autouse=True)
def needs_bwrap() -> None:
    require(isolation_level()[0] != "bwrap", "bubblewrap cannot run here")


def run_tool(
    tmp_path: Path, language: str, source: str, *, work_root: Path | None = None, **fields: Any
) -> RunOutcome:
    folder = tmp_path / "tools" / uuid.uuid4().hex[:8]
    folder.mkdir(parents=True)
    (folder / ENTRY[language]).write_text(textwrap.dedent(source))
    cancel = fields.pop("cancel", None)
    on_update = fields.pop("on_update", None)
    request = RunRequest(
        tool_dir=folder,
        language=language,
        entry=ENTRY[language],
        params=fields.pop("params", {}),
        tool_call_id=fields.pop("tool_call_id", f"call-{uuid.uuid4().hex[:8]}"),
        env={},
        secrets={},
        limits=fields.pop("limits", FAST),
        work_root=work_root or tmp_path / "runs" / uuid.uuid4().hex[:8],
        **fields,
    )
    return run(request, on_update=on_update, cancel=cancel)


def texts(outcome: RunOutcome) -> str:
    return "\n".join(item["text"] for item in outcome.result["content"])


def processes_with_argument(argument: str) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                cmdline = Path(f"/proc/{name}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if argument.encode() in cmdline:
                found.append(int(name))
    return found


def status_ids(pid: int) -> dict[str, list[int]]:
    """The Uid, Gid and PPid lines of a host process's /proc/<pid>/status."""
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    fields = dict(line.split(":\t", 1) for line in lines if ":\t" in line)
    return {key: [int(v) for v in fields[key].split()] for key in ("Uid", "Gid", "PPid")}


# Each tool starts a child `sleep` with a unique argument, says "ready", then waits to be
# cancelled: from outside, the test finds the child and its parent (the tool process).
SLEEPERS = {
    "python": """
        import subprocess, time

        def execute(tool_call_id, params, signal, on_update):
            subprocess.Popen(["sleep", params["marker"]])
            on_update({"content": [{"type": "text", "text": "ready"}]})
            while not signal.aborted:
                time.sleep(0.05)
            return {"content": [{"type": "text", "text": "aborted"}]}
        """,
    "typescript": """
        import { spawn } from "node:child_process";
        export async function execute(id: string, params: any, signal: AbortSignal, onUpdate: any) {
          spawn("sleep", [params.marker], { stdio: "ignore" });
          onUpdate({ content: [{ type: "text", text: "ready" }] });
          await new Promise((resolve) => signal.addEventListener("abort", resolve));
          return { content: [{ type: "text", text: "aborted" }] };
        }
        """,
    "javascript": """
        import { spawn } from "node:child_process";
        export async function execute(id, params, signal, onUpdate) {
          spawn("sleep", [params.marker], { stdio: "ignore" });
          onUpdate({ content: [{ type: "text", text: "ready" }] });
          await new Promise((resolve) => signal.addEventListener("abort", resolve));
          return { content: [{ type: "text", text: "aborted" }] };
        }
        """,
    "bash": """
        sleep "$INPUT_MARKER" &
        echo ready >&3
        wait
        """,
}


def ids_of_tool_processes(tmp_path: Path, language: str) -> tuple[RunOutcome, list[dict]]:
    marker = f"300.{uuid.uuid4().int % 10**9}"
    cancel = threading.Event()
    seen: list[dict] = []

    def on_update(update: dict) -> None:
        deadline = time.monotonic() + 10
        while not (pids := processes_with_argument(marker)) and time.monotonic() < deadline:
            time.sleep(0.02)
        for pid in pids:
            child = status_ids(pid)
            seen.extend([child, status_ids(child["PPid"][0])])  # the sleep and the tool
        cancel.set()

    outcome = run_tool(
        tmp_path,
        language,
        SLEEPERS[language],
        params={"marker": marker},
        on_update=on_update,
        cancel=cancel,
    )
    return outcome, seen


@pytest.mark.parametrize("language", sorted(SLEEPERS))
def test_it_runs_tool_code_as_an_unprivileged_host_user(tmp_path: Path, language: str) -> None:
    outcome, seen = ids_of_tool_processes(tmp_path, language)
    assert outcome.status == CANCELLED, outcome
    assert len(seen) == 2
    # Real, effective, saved and file-system ids; a non-root worker's tools run as itself.
    expected = ([65534] * 4, [65534] * 4) if ROOT else ([os.geteuid()] * 4, [os.getegid()] * 4)
    assert [(ids["Uid"], ids["Gid"]) for ids in seen] == [expected] * 2


@prerequisite(not ROOT, "the run uid applies to a root worker")
def test_it_runs_as_the_configured_runner_uid(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONSOLE_RUNNER_UID", "4242")
    monkeypatch.setenv("CONSOLE_RUNNER_GID", "4343")
    outcome, seen = ids_of_tool_processes(tmp_path, "bash")
    assert outcome.status == CANCELLED, outcome
    assert [(ids["Uid"], ids["Gid"]) for ids in seen] == [([4242] * 4, [4343] * 4)] * 2


@pytest.fixture
def spares(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("TOOL_CONSOLE_SPARE_SANDBOXES", "on")
    standby.discard_spare()
    yield
    standby.discard_spare()


@pytest.mark.parametrize("language", ["python", "typescript"])
def test_it_runs_a_spares_tool_code_as_an_unprivileged_host_user(
    tmp_path: Path, language: str, spares: None
) -> None:
    work = tmp_path / "work"
    first, _ = ids_of_tool_processes(work, language)
    outcome, seen = ids_of_tool_processes(work, language)
    assert (first.spare, outcome.spare) == (False, True)
    assert outcome.status == CANCELLED and len(seen) == 2
    for ids in seen:
        assert 0 not in ids["Uid"] + ids["Gid"]


WRITES_EVERYWHERE = {
    "python": """
        import os
        def execute(tool_call_id, params, signal, on_update):
            for folder in (os.environ["HOME"], "/tmp", os.environ["TOOL_OUTPUT_DIR"]):
                with open(os.path.join(folder, "x.txt"), "w") as f:
                    f.write("hello")
            return {"content": [{"type": "text", "text": "wrote"}]}
        """,
    "typescript": """
        import { writeFileSync } from "node:fs";
        export async function execute() {
          for (const dir of [process.env.HOME, "/tmp", process.env.TOOL_OUTPUT_DIR]) {
            writeFileSync(`${dir}/x.txt`, "hello");
          }
          return { content: [{ type: "text", text: "wrote" }] };
        }
        """,
    "javascript": """
        import { writeFileSync } from "node:fs";
        export async function execute() {
          for (const dir of [process.env.HOME, "/tmp", process.env.TOOL_OUTPUT_DIR]) {
            writeFileSync(`${dir}/x.txt`, "hello");
          }
          return { content: [{ type: "text", text: "wrote" }] };
        }
        """,
    "bash": """
        for dir in "$HOME" /tmp "$TOOL_OUTPUT_DIR"; do echo -n hello > "$dir/x.txt"; done
        echo -n wrote
        """,
}


@pytest.mark.parametrize("language", sorted(WRITES_EVERYWHERE))
def test_it_runs_under_a_0700_state_dir(tmp_path: Path, language: str) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o700)
    outcome = run_tool(
        locked, language, WRITES_EVERYWHERE[language], work_root=locked / "runs" / "1"
    )
    assert (outcome.status, texts(outcome)) == (SUCCEEDED, "wrote"), outcome
    assert [(a.name, a.path.read_text()) for a in outcome.artifacts] == [("x.txt", "hello")]


KERNEL_SETTINGS = """
    import os

    def attempt(path):
        try:
            with open(path, "a"):
                return "writable"
        except OSError as exc:
            return type(exc).__name__

    def execute(tool_call_id, params, signal, on_update):
        mounts = {}
        for line in open("/proc/self/mountinfo"):
            fields = line.split()
            mounts[fields[4]] = fields[5].split(",")[0]
        report = {
            "core_pattern": attempt("/proc/sys/kernel/core_pattern"),
            "sysrq": attempt("/proc/sysrq-trigger"),
            "proc_sys_mount": mounts.get("/proc/sys"),
            "sys_visible": os.path.exists("/sys/kernel"),
        }
        return {"content": [{"type": "text", "text": __import__("json").dumps(report)}]}
    """


def test_it_keeps_kernel_settings_read_only(tmp_path: Path) -> None:
    outcome = run_tool(tmp_path, "python", KERNEL_SETTINGS)
    report = json.loads(texts(outcome))
    assert report["core_pattern"] in ("PermissionError", "OSError")
    assert report["sysrq"] in ("PermissionError", "OSError", "FileNotFoundError")
    assert report["proc_sys_mount"] == "ro"
    assert report["sys_visible"] is False


SYSCALLS = """
    import ctypes, errno, json, os

    libc = ctypes.CDLL(None, use_errno=True)
    NR = {  # x86-64
        "mount": 165, "umount2": 166, "pivot_root": 155, "swapon": 167, "swapoff": 168,
        "reboot": 169, "kexec_load": 246, "kexec_file_load": 320, "init_module": 175,
        "finit_module": 313, "delete_module": 176, "bpf": 321, "perf_event_open": 298,
        "userfaultfd": 323, "keyctl": 250, "add_key": 248, "request_key": 249,
        "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311,
        "open_by_handle_at": 304, "clone3": 435,
    }
    CLONE_NEWUSER = 0x10000000
    buf = ctypes.create_string_buffer(64)

    def call(nr, *args):
        libc.syscall.restype = ctypes.c_long
        result = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
        return "ok" if result >= 0 else errno.errorcode[ctypes.get_errno()]

    def execute(tool_call_id, params, signal, on_update):
        # Arguments that work (or fail otherwise than EPERM) for an unprivileged process
        # without a filter, where there are such.
        iov = (ctypes.c_void_p * 2)(ctypes.cast(buf, ctypes.c_void_p).value, 8)
        iov_addr = ctypes.addressof(iov)
        pid = os.getpid()
        report = {name: call(nr) for name, nr in NR.items()}
        report["ptrace"] = call(101, 0)  # PTRACE_TRACEME
        report["keyctl"] = call(250, 0, -3, 0)  # KEYCTL_GET_KEYRING_ID session keyring
        report["process_vm_readv"] = call(310, pid, iov_addr, 1, iov_addr, 1, 0)
        report["userfaultfd"] = call(323, 0)
        report["unshare_newuser"] = call(272, CLONE_NEWUSER)
        report["clone_newuser"] = call(56, CLONE_NEWUSER | 17, 0, 0, 0, 0)  # | SIGCHLD
        report["seccomp_mode"] = [
            line.split()[1] for line in open("/proc/self/status") if line.startswith("Seccomp:")
        ][0]
        return {"content": [{"type": "text", "text": json.dumps(report)}]}
    """


@prerequisite(os.uname().machine != "x86_64", "system call numbers of x86-64")
def test_it_denies_dangerous_system_calls(tmp_path: Path) -> None:
    outcome = run_tool(tmp_path, "python", SYSCALLS)
    assert outcome.status == SUCCEEDED, outcome
    report = json.loads(texts(outcome))
    assert report.pop("seccomp_mode") == "2"
    assert report.pop("clone3") == "ENOSYS"
    assert report == dict.fromkeys(report, "EPERM")


@pytest.mark.parametrize("language", sorted(WRITES_EVERYWHERE))
def test_a_normal_tool_works_under_the_filter_in_every_language(
    tmp_path: Path, language: str
) -> None:
    outcome = run_tool(tmp_path, language, WRITES_EVERYWHERE[language])
    assert (outcome.status, texts(outcome)) == (SUCCEEDED, "wrote"), outcome


@unprivileged.when_root
def test_the_boundary_holds_for_an_unprivileged_worker(tmp_path: Path) -> None:
    assert os.geteuid() != 0  # as root, this runs in a child as uid 65534
    test_it_keeps_kernel_settings_read_only(tmp_path)
    if os.uname().machine == "x86_64":
        test_it_denies_dangerous_system_calls(tmp_path)
    for language in sorted(WRITES_EVERYWHERE):
        test_a_normal_tool_works_under_the_filter_in_every_language(tmp_path, language)


QUOTA = Limits(timeout=60, grace_seconds=1, disk_mb=32)


def quota_mounts(under: Path) -> list[str]:
    with open("/proc/self/mountinfo") as mountinfo:
        return [line for line in mountinfo if str(under) in line]


class DiskWatch:
    """Samples how much the run's quota file system holds while the run goes on."""

    def __init__(self, under: Path) -> None:
        self.under = under
        self.most = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self.stop.is_set():
            for line in quota_mounts(self.under):
                with_point = line.split()[4]
                try:
                    info = os.statvfs(with_point)
                except OSError:
                    continue
                self.most = max(self.most, (info.f_blocks - info.f_bfree) * info.f_frsize)
            time.sleep(0.005)

    def __enter__(self) -> DiskWatch:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()


DISK_HOGS = {
    "bash-2GiB": ("bash", 'dd if=/dev/zero of="$HOME/big" bs=1M count=2048 2>&1\necho survived'),
    "bash-spread": (
        "bash",
        """
        for dir in "$HOME" /tmp "$TOOL_OUTPUT_DIR"; do
          head -c 12M /dev/zero > "$dir/part" || exit 0
        done
        echo survived
        """,
    ),
    "python-2GiB": (
        "python",
        """
        def execute(tool_call_id, params, signal, on_update):
            chunk = b"x" * (1 << 20)
            try:
                with open("/tmp/big", "wb") as f:
                    for _ in range(2048):
                        f.write(chunk)
            except OSError as exc:
                return {"content": [{"type": "text", "text": f"caught {exc}"}]}
            return {"content": [{"type": "text", "text": "survived"}]}
        """,
    ),
}


@prerequisite(not ROOT, "the quota file system needs a root worker")
@pytest.mark.parametrize("case", sorted(DISK_HOGS))
def test_it_stops_a_tool_at_the_disk_quota(tmp_path: Path, case: str) -> None:
    language, source = DISK_HOGS[case]
    with DiskWatch(tmp_path) as watch:
        outcome = run_tool(tmp_path, language, source, limits=QUOTA)
    assert outcome.status == FAILED, outcome
    assert texts(outcome).startswith(
        "The tool wrote more than 32 MiB (the run's disk quota) and was stopped."
    )
    assert "out of memory" not in texts(outcome)
    assert 0 < watch.most <= 32 << 20
    teardown.drain()
    assert quota_mounts(tmp_path) == []


@prerequisite(not ROOT, "the quota file system needs a root worker")
def test_it_stops_a_tool_that_makes_too_many_files(tmp_path: Path) -> None:
    source = 'for i in $(seq 1 20000); do : > "$HOME/f$i" || exit 0; done\necho survived'
    outcome = run_tool(tmp_path, "bash", source, limits=QUOTA)
    assert outcome.status == FAILED, outcome
    assert texts(outcome).startswith(
        "The tool created more than 8192 files (the run's disk quota of 32 MiB allows no more)"
    )
    teardown.drain()
    assert quota_mounts(tmp_path) == []


@prerequisite(not ROOT, "the quota file system needs a root worker")
def test_it_stops_a_spares_tool_at_the_disk_quota(tmp_path: Path, spares: None) -> None:
    language, source = DISK_HOGS["python-2GiB"]
    ok = "def execute(tool_call_id, params, signal, on_update):\n    return {'content': []}\n"
    assert run_tool(tmp_path, "python", ok, limits=QUOTA).status == SUCCEEDED
    outcome = run_tool(tmp_path, language, source, limits=QUOTA)
    assert outcome.spare
    assert texts(outcome).startswith("The tool wrote more than 32 MiB")
    standby.discard_spare()
    teardown.drain()
    assert quota_mounts(tmp_path) == []


@prerequisite(not ROOT, "the quota file system needs a root worker")
def test_it_unmounts_the_quotas_of_a_dead_worker(tmp_path: Path) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    target = tmp_path / "run-x" / quota.WRITABLE
    target.mkdir(parents=True)
    source = f"{quota.SOURCE}-{dead.pid}-1"
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", source, str(target)], check=True)
    assert len(quota_mounts(tmp_path)) == 1
    quota._swept = False  # once per process: this test is a new process's first run
    quota.sweep()
    teardown.drain()
    assert quota_mounts(tmp_path) == []


def test_it_leaves_no_detached_process_behind(tmp_path: Path) -> None:
    marker = f"301.{uuid.uuid4().int % 10**9}"
    source = f"""
        setsid sleep {marker} < /dev/null > /dev/null 2>&1 &
        nohup sleep {marker} < /dev/null > /dev/null 2>&1 &
        ( ( sleep {marker} < /dev/null > /dev/null 2>&1 & ) & )
        sleep 0.2
        echo detached
        """
    outcome = run_tool(tmp_path, "bash", source)
    assert (outcome.status, texts(outcome)) == (SUCCEEDED, "detached\n")
    assert processes_with_argument(marker) == []


@pytest.fixture
def no_bwrap(monkeypatch: pytest.MonkeyPatch) -> None:
    """bubblewrap missing, as the console finds it: TOOL_CONSOLE_BWRAP names no binary."""
    monkeypatch.setenv("TOOL_CONSOLE_BWRAP", "/nonexistent/bwrap")


@prerequisite(not ROOT, "a root worker is what refuses")
def test_a_root_worker_without_bubblewrap_refuses_to_run_tools(
    tmp_path: Path, no_bwrap: None
) -> None:
    marker = tmp_path / "ran"
    outcome = run_tool(tmp_path, "bash", f"touch {marker}\necho ran")
    assert outcome.status == FAILED
    assert texts(outcome).startswith(
        "Refused: the worker runs as root and bubblewrap is not available "
        "(bubblewrap (bwrap) is not installed)"
    )
    assert not marker.exists()


@prerequisite(not ROOT, "a root worker is what refuses")
def test_the_run_page_and_system_check_say_why_a_root_worker_refuses(
    console_admin_client, make_tool, no_bwrap: None
) -> None:
    tool = make_tool("echo_tool", language="bash")
    started = start.start_run(
        tool.published_version, {}, actor=Actor.system(), via=RunVia.COMMAND, enqueue=False
    )
    done = run_execute.execute_run(started.pk)
    assert done.status == RunStatus.FAILED
    # An admin reads any run's result (its starter, the system, is no person).
    page = console_admin_client.get(f"/runs/{done.pk}/").content.decode()
    assert "Refused: the worker runs as root and bubblewrap is not available" in page
    # Only the deploy check fails on it: migrate and friends run no tool
    # (tests/ops/test_no_sandbox_console.py).
    with pytest.raises(SystemCheckError, match=r"tools_app\.E001.*refuses to run tools"):
        call_command("check", deploy=True)


@prerequisite(not ROOT, "the run uid applies to a root worker")
@pytest.mark.parametrize(("uid", "gid"), [("0", "65534"), ("65534", "0"), ("nobody", "1")])
def test_it_refuses_a_runner_uid_of_root_or_garbage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, uid: str, gid: str
) -> None:
    monkeypatch.setenv("CONSOLE_RUNNER_UID", uid)
    monkeypatch.setenv("CONSOLE_RUNNER_GID", gid)
    marker = tmp_path / "ran"
    outcome = run_tool(tmp_path, "bash", f"touch {marker}")
    assert outcome.status == FAILED
    assert texts(outcome).startswith("Refused: the worker runs as root and CONSOLE_RUNNER_UID")
    assert not marker.exists()
