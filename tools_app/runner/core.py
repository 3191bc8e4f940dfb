"""run(): one tool execution from start to outcome, whatever the tool does.

The runner's thread drives everything: it starts the launcher (which joins the run's
cgroups, sets rlimits and execs bwrap or the interpreter), reads the child's pipes
incrementally, enforces the wall time, cancellation and the process and memory limits, then
kills whatever is left and collects artifacts. The outcome goes out once every process of
the run is dead; the cgroup, the disk quota, the network and the work dir are freed after
that, on the teardown thread (teardown.py).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from tools_app.lib import nesting
from tools_app.manifest.languages import LANGUAGES
from tools_app.manifest.outputs import json_kind, structured_problems

from . import (
    artifacts,
    cgroups,
    network,
    privilege,
    procs,
    quota,
    sandbox,
    seccomp,
    standby,
    teardown,
    tsstrip,
)
from .gate import Gate
from .limits import format_bytes, format_cpus, format_seconds
from .records import (
    CANCELLED,
    FAILED,
    SUCCEEDED,
    TIMED_OUT,
    Artifact,
    RunOutcome,
    RunRequest,
)
from .redact import Redactor
from .streams import Head, Lines, Tail, clip_utf8, clip_utf8_start, decode

logger = logging.getLogger(__name__)

UpdateCallback = Callable[[dict[str, Any]], None]
Content = list[dict[str, str]]

POLL_SECONDS = 0.05
WATCH_SECONDS = 0.1  # how often the process/memory watchdog looks, where it is needed
DRAIN_SECONDS = 1.0  # reading what is left in the pipes after everything was killed
MESSAGE_TAIL_BYTES = 2048  # of stdout/stderr quoted in an error message
# What running out of memory prints, where no cgroup counts OOM kills: V8's heap limit,
# bash and coreutils hitting RLIMIT_AS.
OOM_MARKERS = (
    "JavaScript heap out of memory",
    "Fatal process out of memory",
    "xmalloc: cannot allocate",
    "xrealloc: cannot allocate",
    ": memory exhausted",
)
# What a process killed for writing past RLIMIT_FSIZE (the disk quota) leaves: bash's note.
DISK_MARKERS = ("File size limit exceeded",)
CANCELLED_TEXT = "Cancelled: the run was cancelled"
LIMIT_PROCESSES = "processes"
LIMIT_MEMORY = "memory"
LIMIT_DISK = "disk"


def run(
    request: RunRequest,
    on_update: UpdateCallback | None = None,
    cancel: threading.Event | None = None,
) -> RunOutcome:
    """Run one tool in the sandbox; never raises for anything the tool does."""
    isolation, why = sandbox.isolation_level()
    started = time.monotonic()
    problem = _request_problem(request) or privilege.refusal(isolation, why)
    if problem:
        return _outcome_without_process(isolation, FAILED, problem, started)
    if cancel is not None and cancel.is_set():
        return _outcome_without_process(isolation, CANCELLED, CANCELLED_TEXT + ".", started)
    net = network.plan(request.network, isolation, request.egress)
    if net.error:
        return _outcome_without_process(isolation, FAILED, net.error, started)
    shape = standby.shape_for(
        request.language,
        request.network,
        request.limits,
        request.ro_binds,
        request.work_root,
        net.policy,
    )
    spare = standby.take(shape) if shape is not None else None
    execution = _Execution(request, isolation, on_update, cancel, shape, spare, net)
    try:
        if not execution.start():
            return execution.outcome()
        execution.wait()
        execution.finish()
        return execution.outcome()
    finally:
        # Every process of the run is killed before the outcome goes out (nothing of the
        # tool outlives its run); freeing what it held is left to the teardown thread.
        execution.kill_leftovers()
        teardown.submit(execution.cleanup)
        if shape is not None:
            standby.prepare(shape)


def _request_problem(request: RunRequest) -> str | None:
    if request.language not in LANGUAGES:
        return (
            f"Unknown tool language {request.language!r}; expected one of {', '.join(LANGUAGES)}."
        )
    entry = PurePosixPath(request.entry)
    if len(entry.parts) != 1 or entry.name in ("", ".", ".."):
        return f"Invalid entry file name {request.entry!r}."
    if not (Path(request.tool_dir) / request.entry).is_file():
        return f"The tool folder has no entry file {request.entry}."
    if request.limits.timeout <= 0:
        return "The timeout must be positive."
    return None


def _text_result(text: str, *, is_error: bool) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": is_error}


def _outcome_without_process(
    isolation: str, status: str, message: str, started: float
) -> RunOutcome:
    return RunOutcome(
        status=status,
        result=_text_result(message, is_error=True),
        stderr_tail="",
        artifacts=[],
        isolation=isolation,
        exit_code=None,
        duration=time.monotonic() - started,
        notices=[],
    )


def _valid_content(value: object) -> Content | None:
    """The content list of a protocol message, with texts made valid UTF-8; None if bad."""
    if not isinstance(value, list):
        return None
    content = []
    for item in value:
        if not (isinstance(item, dict) and item.get("type") == "text"):
            return None
        if not isinstance(text := item.get("text"), str):
            return None
        content.append({"type": "text", "text": text.encode("utf-8", "replace").decode()})
    return content


_NOT_STORABLE = re.compile("[\x00\ud800-\udfff]")


def _clean_json(value: Any) -> Any:
    """A parsed JSON value whose strings (keys too) are valid UTF-8 without NUL, which
    PostgreSQL's jsonb cannot store (nested no deeper than the cap, checked before)."""
    if isinstance(value, str):
        return _NOT_STORABLE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {_clean_json(str(k)): _clean_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean_json(v) for v in value]
    return value


def _bash_progress(line: bytes) -> dict | None:
    """A bash tool's fd 3 line that is a JSON object with a `progress` key, like
    {"progress": 3, "total": 10, "message": "..."} (MCP's notifications/progress): its
    progress, total and message; None for any other line, which is text as it was."""
    if not line.startswith(b"{"):
        return None
    try:
        value = json.loads(decode(line))
    except ValueError:
        return None
    if not isinstance(value, dict) or "progress" not in value:
        return None
    return {k: value[k] for k in ("progress", "total", "message") if k in value}


_FOLDER_HANDLE = os.O_PATH | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC


@dataclass
class _RunDirs:
    root: Path  # <work_root>/run-<id>: ours while running, then only artifacts/ is left
    home: Path  # the tool's work dir, in the run's disk quota (quota.py)
    output: Path  # TOOL_OUTPUT_DIR
    tmp: Path  # /tmp (bwrap) or TMPDIR (a plain subprocess)
    artifacts: Path

    @classmethod
    def create(cls, work_root: Path | None) -> _RunDirs:
        """The run's directory; what the tool writes to is made by quota.prepare()."""
        if work_root is None:
            root = Path(tempfile.mkdtemp(prefix="tool-run-"))
        else:
            root = Path(work_root) / f"run-{uuid.uuid4().hex}"
            root.parent.mkdir(parents=True, exist_ok=True)
            root.mkdir(mode=0o700)
        return cls.at(root)

    @classmethod
    def at(cls, root: Path) -> _RunDirs:
        """The layout of a run's (or a standby sandbox's) directory."""
        home = quota.home(root)
        return cls(root, home, home / "output", quota.tmp(root), root / "artifacts")


def _remove_tree(path: Path) -> None:
    """Remove a work dir, including directories a tool made read-only. The tool may have
    left links to anywhere in it, and this may run as root: the walk goes by descriptors
    (os.fwalk follows no link), and each folder is made writable through an O_PATH
    descriptor opened with O_NOFOLLOW, so a link is never chmod-ed through (nor raises
    NotImplementedError, as chmod(follow_symlinks=False) does on one)."""
    if not path.exists():
        return
    for _, dirs, _, dir_fd in os.fwalk(path):
        for name in dirs:
            with contextlib.suppress(OSError):
                fd = os.open(name, _FOLDER_HANDLE, dir_fd=dir_fd)
                try:
                    os.chmod(f"/proc/self/fd/{fd}", 0o700)  # the folder itself
                finally:
                    os.close(fd)
    shutil.rmtree(path, ignore_errors=True)


class _Execution:
    def __init__(
        self,
        request: RunRequest,
        isolation: str,
        on_update: UpdateCallback | None,
        cancel: threading.Event | None,
        shape: standby.Shape | None = None,
        spare: standby.Sandbox | None = None,
        net: network.Plan | None = None,
    ) -> None:
        self.request = request
        self.net_plan = net or network.Plan(None, "")
        self.net: network.Network | None = None
        self.shape = shape  # None: the gated or launcher start below, else a standby sandbox
        if spare is not None and not spare.move_to(request.work_root):
            spare.discard()
            spare = None
        self.box = spare
        self.used_spare = spare is not None
        self.stdin_data = memoryview(b"")
        self.limits = request.limits
        self.isolation = isolation
        self.on_update = on_update
        self.cancel = cancel
        self.redactor = Redactor(request.secrets)
        self.notices: list[str] = []
        self.output_parent: Path | None = None  # of params.output_path, made for the tool
        if spare is not None:
            self.dirs = _RunDirs.at(spare.root)
        else:
            self.dirs = _RunDirs.create(request.work_root)
        self.cgroup: cgroups.RunCgroup | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self.pidfd = -1  # on self.proc while it runs, in the selector
        self.start_error = ""
        self.selector = selectors.DefaultSelector()
        self.started = time.monotonic()
        self.exited_at: float | None = None
        self.stop_reason: str | None = None  # CANCELLED or TIMED_OUT
        self.stopped_at = 0.0
        self.killed = False
        self.ended_by_result = False  # killed by the runner once the harness reported
        self.killed_after_grace = False
        self.limit_hit: str | None = None  # LIMIT_PROCESSES or LIMIT_MEMORY
        self.result_message: dict[str, Any] | None = None
        self.result_at: float | None = None
        self.updates = 0
        self.oom_kills = 0
        self.artifacts: list[Artifact] = []
        self.inputs_written = False
        self.log = Tail(self.limits.stderr_tail_bytes)
        self.stdout = Head(self.limits.max_result_bytes)  # bash: the result
        self.stdout_tail = Tail(MESSAGE_TAIL_BYTES)  # bash: quoted when it fails
        longest = max(self.limits.max_result_bytes, self.limits.max_update_bytes)
        # JSON may escape a byte into six, so a clipped message can be this long; a result
        # also carries up to max_result_bytes of structuredContent.
        self.protocol = Lines(7 * longest + (64 << 10))
        self.update_lines = Lines(self.limits.max_update_bytes)  # bash: fd 3

    # -- start -------------------------------------------------------------------------

    def _notice(self, text: str) -> None:
        if text not in self.notices:
            self.notices.append(text)

    def _cpu_notice(self) -> None:
        # Never silently unlimited: the run page and the caller learn the CPU limit is off.
        if reason := cgroups.cpu_unlimited_reason(self.cgroup):
            cpus = format_cpus(self.limits.cpus)
            self._notice(f"the CPU limit ({cpus}) is not enforced on this run: {reason}")

    def cpu_limit(self) -> str:
        """The CPU limit as the run had it, for the run page: "1 CPU" or "none"."""
        return format_cpus(self.limits.cpus) if self.cgroup and self.cgroup.limits_cpu else "none"

    def _params(self, paths: sandbox.ToolPaths) -> dict[str, Any]:
        """The params, with `output_path` turned into a path inside TOOL_OUTPUT_DIR."""
        params = dict(self.request.params)
        self._write_input_files()
        for name in self.request.file_params:
            value = params.get(name)
            if isinstance(value, list):
                params[name] = [f"{paths.home}/{rel}" for rel in value]
            elif isinstance(value, str):
                params[name] = f"{paths.home}/{value}"
        if "output_path" in params:
            raw = str(params["output_path"] or "")
            parts = [p for p in PurePosixPath(raw).parts if p not in ("/", ".", "..")]
            parts = parts or ["output"]
            self.output_parent = Path(*parts).parent
            self._make_output_dirs()
            params["output_path"] = "/".join([paths.output, *parts])
        return params

    def _output_view(self) -> Path:
        """TOOL_OUTPUT_DIR as the runner reaches it (quota.view: a rootless run's quota
        lives in the sandbox's own mount namespace)."""
        return quota.view(self.dirs.root) / "home" / "output"

    def _make_output_dirs(self) -> None:
        if self.output_parent is not None:
            privilege.make_dirs(self._output_view(), self.output_parent)

    def _write_input_files(self) -> None:
        """The run's `file` inputs, into its work dir (inside the disk quota), readable by
        the tool's uid. The relative paths were made safe by tools_app/manifest/input_files.py.
        A cold rootless run mounts its quota only when its sandbox starts: until then the
        files would land under the mount, so they wait for quota.pin."""
        if not self.request.input_files or self.inputs_written:
            return
        if self.isolation == "bwrap" and sandbox.rootless() and not quota.pinned(self.dirs.root):
            return
        home = quota.view(self.dirs.root) / "home"
        for rel, data in self.request.input_files.items():
            relative = PurePosixPath(rel)
            if relative.is_absolute() or ".." in relative.parts:
                continue  # never outside the work dir, whoever built the request
            privilege.make_dirs(home, Path(*relative.parent.parts))
            target = home / Path(*relative.parts)
            with open(target, "xb") as out:
                out.write(data)
            privilege.give(target, 0o644)
        self.inputs_written = True

    def _argv(self, paths: sandbox.ToolPaths) -> list[str]:
        request = self.request
        inner = sandbox.tool_argv(request.language, request.entry, paths, self.limits)
        if self.isolation != "bwrap":
            return inner
        outer = sandbox.bwrap_argv(
            language=request.language,
            network=request.network,
            tool_dir=Path(request.tool_dir).resolve(),
            home=self.dirs.home,
            limits=self.limits,
            ro_binds=request.ro_binds,
            notices=self.notices,
            resolv_conf=network.RESOLV_CONF if self.net_plan.policy is not None else None,
        )
        return outer + inner

    def start(self) -> bool:
        """Start the launcher; False (with a failed result prepared) if that is impossible."""
        if self.shape is not None:
            return self._start_standby(self.shape)
        request, limits = self.request, self.limits
        try:
            quota.prepare(self.dirs.root, limits.disk_bytes)
        except OSError as exc:
            self.start_error = f"The tool could not be started: {exc}"
            return False
        paths = sandbox.tool_paths(
            self.isolation, Path(request.tool_dir).resolve(), self.dirs.home, self.dirs.tmp
        )
        params = self._params(paths)
        inputs = sandbox.bash_inputs(params) if request.language == "bash" else {}
        env = sandbox.tool_env(paths, request.tool_call_id, request.env, inputs, self.notices)
        unshare_net = False
        if not request.network and self.isolation != "bwrap":
            unshare_net = sandbox.process_network_isolation()
            if not unshare_net:
                self._notice("network: false is not enforced under process isolation here")
        tasks = limits.max_processes + cgroups.TASK_ALLOWANCE
        self.cgroup = cgroups.create(limits.memory_bytes, tasks, limits.cpu_quota_us)
        self._cpu_notice()
        # Under bwrap nothing has to happen inside the first process but joining the cgroups
        # and the rlimits, which the runner can do from outside while a tiny shell waits at
        # a gate (a Python launcher costs ~40 ms of interpreter start-up per run).
        gated = self.isolation == "bwrap" and not unshare_net
        log_r, log_w = os.pipe()
        stdout_r, stdout_w = os.pipe() if request.language == "bash" else (-1, -1)
        gate: Gate | None = None
        if gated:
            gate = Gate()
            protocol_r, protocol_w = gate.protocol_r, -1
            launcher: list[str] = []
        else:
            protocol_r, protocol_w = os.pipe()
            config = {
                "cgroups": self.cgroup.procs_files if self.cgroup else [],
                "rlimits": sandbox.rlimits(request.language, limits),
                "protocol_fd": protocol_w,
                "unshare_net": unshare_net,
                # bwrap has --die-with-parent; a plain subprocess gets it from the launcher.
                "die_with_parent": os.getpid() if self.isolation != "bwrap" else None,
            }
            launcher = [sys.executable, "-I", "-S", str(sandbox.LAUNCHER), json.dumps(config)]
        stdin = os.memfd_create("params")
        os.write(stdin, json.dumps(params, default=str).encode())
        os.lseek(stdin, 0, os.SEEK_SET)
        stdout = stdout_w if request.language == "bash" else log_w
        filter_fd = -1
        try:
            command = self._argv(paths)
            self.started = time.monotonic()
            if gate is not None:
                command, filter_fd = seccomp.attach(command)
                policy = self.net_plan.policy
                rootless = sandbox.rootless()
                self.proc = gate.popen(
                    command,
                    stdin=stdin,
                    stdout=stdout,
                    stderr=log_w,
                    env=env,
                    cwd=self.dirs.home,
                    extra_fds=(filter_fd,),
                    prefix=network.gate_prefix(
                        self.dirs.root, limits.disk_bytes, filtered=policy is not None
                    ),
                )
                if rootless:  # the quota is mounted in the run's namespaces: reach it
                    quota.pin(self.dirs.root, self.proc.pid)
                    self._make_output_dirs()
                    self._write_input_files()
                if policy is not None:
                    self.net = network.Network.attach(self.proc.pid, policy, rootless=rootless)
                    self.net.ready()  # bash runs tool code right after the gate opens
                gate.open(self.proc, self.cgroup, sandbox.rlimits(request.language, limits))
            else:
                self.proc = subprocess.Popen(
                    launcher + command,
                    stdin=stdin,
                    stdout=stdout,
                    stderr=log_w,
                    pass_fds=(protocol_w,),
                    env=env,
                    cwd=self.dirs.home,
                    start_new_session=True,
                )
        except (OSError, RuntimeError) as exc:
            if self.proc is not None and self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            self.proc = None
            if gate is not None:
                gate.close()
            for fd in (protocol_r if gate is None else -1, log_r, stdout_r):
                if fd >= 0:
                    os.close(fd)
            self.start_error = f"The tool could not be started: {exc}"
            return False
        finally:
            for fd in (stdin, protocol_w, log_w, stdout_w, filter_fd):
                if fd >= 0:
                    os.close(fd)
        streams: list[tuple[int, Callable[[bytes | None], None]]] = [
            (log_r, self._on_log),
            (protocol_r, self._on_bash_update if request.language == "bash" else self._on_protocol),
        ]
        if request.language == "bash":
            streams.append((stdout_r, self._on_stdout))
        for fd, handler in streams:
            os.set_blocking(fd, False)
            self.selector.register(fd, selectors.EVENT_READ, handler)
        return True

    def _start_standby(self, shape: standby.Shape) -> bool:
        """Hand the run to a spare sandbox, or start one now and hand it over at once."""
        request = self.request
        paths = standby.paths()
        env = sandbox.tool_env(paths, request.tool_call_id, request.env, {}, self.notices)
        box = self.box
        try:
            if box is None:
                # Cold: the whole environment at start, as the other starts do.
                box = self.box = standby.Sandbox.start(shape, self.dirs.root, env)
            for notice in box.notices:
                self._notice(notice)
            box.fill(Path(request.tool_dir))
            stripped = box.fill_stripped(self._stripped_entries(shape))
        except (OSError, RuntimeError) as exc:
            if box is not None:
                box.discard()
                self.box = None
            self.start_error = f"The tool could not be started: {exc}"
            return False
        message = box.message(request.entry, self.limits, env, self._params(paths), stripped)
        self.stdin_data = memoryview(message)
        self.proc, self.cgroup = box.proc, box.cgroup
        self._cpu_notice()
        self.net, box.net = box.net, None
        stdin_w, log_r, protocol_r = box.release_fds()
        self.started = time.monotonic()
        for fd, events, handler in (
            (log_r, selectors.EVENT_READ, self._on_log),
            (protocol_r, selectors.EVENT_READ, self._on_protocol),
            (stdin_w, selectors.EVENT_WRITE, self._write_stdin),
        ):
            os.set_blocking(fd, False)
            self.selector.register(fd, events, handler)
        return True

    def _stripped_entries(self, shape: standby.Shape) -> dict[PurePosixPath, Path]:
        """A typescript tool's files stripped of their types by the worker (tsstrip.py);
        none if that fails: Node strips them in the sandbox then, as it can."""
        if shape.language != "typescript":
            return {}
        cache = tsstrip.cache_dir(shape.folder)
        if cache is None:
            return {}
        try:
            return tsstrip.prepare(Path(self.request.tool_dir), cache)
        except (OSError, RuntimeError, ValueError):
            logger.exception("could not strip the types of %s", self.request.tool_dir)
            return {}

    def _write_stdin(self, fd: int) -> None:
        """Feed the waiting harness its message, as fast as it reads; then end its stdin."""
        try:
            written = os.write(fd, self.stdin_data[: 1 << 16])
        except BlockingIOError:
            return
        except OSError:  # EPIPE: the sandbox is gone; its outcome says why
            written = len(self.stdin_data)
        self.stdin_data = self.stdin_data[written:]
        if not self.stdin_data:
            self.selector.unregister(fd)
            os.close(fd)

    # -- stream handlers (data=None at end of stream) ------------------------------------

    def _on_log(self, data: bytes | None) -> None:
        if data:
            self.log.write(data)

    def _on_stdout(self, data: bytes | None) -> None:
        if data:
            self.stdout.write(data)
            self.stdout_tail.write(data)

    def _on_bash_update(self, data: bytes | None) -> None:
        lines = self.update_lines.feed(data) if data else self.update_lines.flush()
        for line, overflowed in lines:
            counts = None if overflowed else _bash_progress(line)
            if counts is None:
                self._update([{"type": "text", "text": decode(line)}], cut=overflowed)
            else:
                message = counts.pop("message", None)
                text = message if isinstance(message, str) else ""
                content = [{"type": "text", "text": text}] if text else []
                self._update(content, cut=False, counts=counts)

    def _on_protocol(self, data: bytes | None) -> None:
        for line, overflowed in self.protocol.feed(data) if data else ():
            if overflowed:
                self._notice("a protocol message from the harness was too large and dropped")
                continue
            try:
                # The cap on nesting (a result's structuredContent is its level 1): the
                # harness runs in the tool's process, so the tool can write any line here,
                # and a deep one would exhaust the stack.
                message = nesting.loads(decode(line), root="message", level=0)
            except nesting.TooDeep:
                self._notice("a protocol message from the harness nested too deep was dropped")
                continue
            except ValueError:
                continue  # a line cut short by a kill
            if not isinstance(message, dict):
                continue
            kind = message.get("type")
            if kind == "update" and (content := _valid_content(message.get("content"))) is not None:
                # Checked where updates are stored (tools_app/runs/progress.py), not here.
                counts = {k: message[k] for k in ("progress", "total") if k in message}
                if content or counts:
                    self._update(content, cut=bool(message.get("truncated")), counts=counts)
            elif kind == "update_limit":
                self._update_limit_reached()
            elif kind == "result" and self.result_message is None:
                self.result_message = message
                self.result_at = time.monotonic()

    def _update_limit_reached(self) -> None:
        self._notice(f"update limit reached ({self.limits.max_updates}); later updates dropped")

    def _update(self, content: Content, *, cut: bool, counts: dict | None = None) -> None:
        self.updates += 1
        if self.updates > self.limits.max_updates:
            self._update_limit_reached()
            return
        capped, truncated = self._cap(content, self.limits.max_update_bytes, cut=cut)
        if truncated:
            self._notice(
                f"progress updates truncated at {format_bytes(self.limits.max_update_bytes)}"
            )
        if self.on_update is not None:
            self.on_update({"content": capped, **(counts or {})})

    def _cap(self, content: Content, max_bytes: int, *, cut: bool) -> tuple[Content, bool]:
        """Redact, then cut to `max_bytes` of text in all. `cut`: the last text was already
        cut upstream (so it may end in part of a secret)."""
        capped: Content = []
        used, truncated = 0, cut
        for index, item in enumerate(content):
            text = self.redactor.redact(item["text"], cut_end=cut and index == len(content) - 1)
            text, clipped = clip_utf8(text, max(0, max_bytes - used))
            truncated = truncated or clipped
            if text or not clipped:
                capped.append({"type": "text", "text": text})
            used += len(text.encode())
        return capped, truncated

    # -- the loop ----------------------------------------------------------------------

    def _watch_exit(self) -> None:
        """Have the selector wake up the moment the sandbox's main process exits (a
        pidfd), not at the next poll."""
        assert self.proc is not None
        try:
            self.pidfd = os.pidfd_open(self.proc.pid)
        except (AttributeError, OSError):  # no pidfd here, or already reaped: poll
            return
        self.selector.register(self.pidfd, selectors.EVENT_READ, None)

    def _close_pidfd(self) -> None:
        if self.pidfd >= 0:
            with contextlib.suppress(KeyError, ValueError):
                self.selector.unregister(self.pidfd)
            os.close(self.pidfd)
            self.pidfd = -1

    def wait(self) -> None:
        assert self.proc is not None
        deadline = self.started + self.limits.timeout
        next_watch = 0.0
        self._watch_exit()
        while True:
            now = time.monotonic()
            if self.exited_at is None:
                if self.proc.poll() is not None:
                    self.exited_at = now
                    self._close_pidfd()  # from here on, the map holds the pipes only
                    self._kill_everything()  # background children, the rest of the sandbox
                else:
                    self._enforce(now, deadline)
                    if now >= next_watch:
                        self._watch()
                        next_watch = now + WATCH_SECONDS
            elif not self.selector.get_map() or now - self.exited_at > DRAIN_SECONDS:
                return
            if not self.selector.get_map():  # all pipes closed: wait for the exit itself
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.proc.wait(POLL_SECONDS)
                continue
            for key, events in self.selector.select(POLL_SECONDS):
                if key.fd == self.pidfd:
                    continue  # exited: the top of the loop reaps it
                if events & selectors.EVENT_WRITE:
                    key.data(key.fd)
                else:
                    self._read(key)

    def _read(self, key: selectors.SelectorKey) -> None:
        try:
            data = os.read(key.fd, 1 << 16)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if data:
            key.data(data)
        else:
            self.selector.unregister(key.fd)
            os.close(key.fd)
            key.data(None)

    def _enforce(self, now: float, deadline: float) -> None:
        if self.stop_reason is None and self.result_at is None and self.limit_hit is None:
            if self.cancel is not None and self.cancel.is_set():
                self._stop(CANCELLED, now)
            elif now >= deadline:
                self._stop(TIMED_OUT, now)
        if self.killed:
            return
        if self.stop_reason and now >= self.stopped_at + self.limits.grace_seconds:
            self.killed_after_grace = True
            self._kill_everything()
        elif self.result_at is not None:
            # A harness (bash has none: its fd 3 carries updates only) sends its result
            # last, after the tool's output: its own exit (Node's teardown) is not worth
            # waiting for.
            self.ended_by_result = True
            self._kill_everything()

    def _stop(self, reason: str, now: float) -> None:
        """SIGTERM to the tool's processes: the abort signal fires, bash gets its SIGTERM."""
        self.stop_reason = reason
        self.stopped_at = now
        table = procs.process_table()
        targets = [
            pid
            for pid in self._members(table)
            if pid in table and not (self.isolation == "bwrap" and table[pid].comm == "bwrap")
        ]
        # Parents first: bash that is waiting for a child it has just lost to SIGTERM may
        # otherwise never run its TERM trap.
        procs.send(sorted(targets, key=lambda pid: procs.depth(pid, table)), signal.SIGTERM)
        if self.isolation != "bwrap" and self.proc is not None:
            procs.send_group(self.proc.pid, signal.SIGTERM)

    def _members(self, table: dict[int, procs.Proc] | None = None) -> set[int]:
        """The run's live processes on the host (zombies excluded)."""
        assert self.proc is not None
        if self.cgroup is not None:
            return self.cgroup.members()
        table = table if table is not None else procs.process_table()
        members = procs.run_members(self.proc.pid, table, same_session=self.isolation != "bwrap")
        return {pid for pid in members if table[pid].state != "Z"}

    def _watch(self) -> None:
        """The disk quota; process and memory limits where no cgroup enforces them."""
        if quota.exhausted(self.dirs.root):
            self._limit(LIMIT_DISK)
            return
        cgroup = self.cgroup
        if cgroup is not None and cgroup.process_limit_hit():
            self._limit(LIMIT_PROCESSES)
            return
        count_processes = cgroup is None or not cgroup.limits_processes
        count_memory = cgroup is None or not cgroup.limits_memory
        if not (count_processes or count_memory):
            return
        table = procs.process_table()
        members = [table[pid] for pid in self._members(table) if pid in table]
        tool = [p for p in members if not (self.isolation == "bwrap" and p.comm == "bwrap")]
        if count_processes and len(tool) > self.limits.max_processes:
            self._limit(LIMIT_PROCESSES)
        elif count_memory and sum(p.rss for p in members) > self.limits.memory_bytes:
            self._limit(LIMIT_MEMORY)

    def _limit(self, kind: str) -> None:
        if self.limit_hit is None and self.result_at is None:
            self.limit_hit = kind
            self._kill_everything()

    def _kill_everything(self) -> None:
        """SIGKILL every process of the run, until none is left (at most ~1 s)."""
        assert self.proc is not None
        self.killed = True
        # The run is final only once this returns, so it looks again often at first: a
        # killed Node takes ~2.5 ms to be gone (its address space torn down), and a 1 ms
        # step would add half a step to every run on average.
        for attempt in range(150):
            if self.cgroup is not None:
                self.cgroup.kill()
            if self.isolation != "bwrap":
                procs.send_group(self.proc.pid, signal.SIGKILL)
            if self.proc.poll() is None:
                self.proc.kill()  # in bwrap mode this tears down the whole PID namespace
            members = self._members()
            if not members:
                return
            procs.send(members, signal.SIGKILL)
            time.sleep(0.0002 if attempt < 50 else 0.01)

    # -- the end -----------------------------------------------------------------------

    def finish(self) -> None:
        """Everything is dead: read the cgroup's verdict, then take the artifacts out."""
        if self.cgroup is not None:
            self.oom_kills = self.cgroup.oom_kills()
            # A tool may exit while its forks still hit the limit: that is no success.
            hit = self.cgroup.process_limit_hit() and self.result_message is None
            if hit and self.limit_hit is None and self.stop_reason is None:
                self.limit_hit = LIMIT_PROCESSES
            if self.cgroup.cpu_throttled():
                self._notice(
                    f"the tool was slowed down to its CPU limit ({format_cpus(self.limits.cpus)})"
                )
        if self.limit_hit is None and self.stop_reason is None and self._wrote_too_much():
            self.limit_hit = LIMIT_DISK
        self.artifacts = artifacts.collect(
            quota.view(self.dirs.root),
            self.dirs.artifacts,
            self.limits,
            self.redactor,
            self.notices,
        )

    def kill_leftovers(self) -> None:
        """Make sure no process of the run is left (a run that ended early, or in error);
        after a normal end, wait() has killed them all already."""
        if self.proc is not None and (self.proc.poll() is None or self.exited_at is None):
            self._kill_everything()

    def cleanup(self) -> None:
        """Free what the run held; on the teardown thread (teardown.py), once every
        process of the run is dead."""
        self.kill_leftovers()
        self._close_pidfd()
        for key in list(self.selector.get_map().values()):
            self.selector.unregister(key.fd)
            os.close(key.fd)
        self.selector.close()
        if self.net is not None:  # after every process of the sandbox is gone
            self.net.close()
        if self.cgroup is not None:
            self.cgroup.remove()
        quota.release(self.dirs.root)  # the quota's files go with it
        root = self.dirs.root
        for path in (quota.writable(root), root / "tool", root / "js"):
            _remove_tree(path)
        if not self.artifacts:
            _remove_tree(self.dirs.root)

    @property
    def exit_code(self) -> int | None:
        if self.proc is None or self.proc.returncode is None:
            return None
        if self.ended_by_result:
            return 0  # what the harness exits with after its result, had it been let
        code = self.proc.returncode
        # bwrap reports a child killed by signal N as 128 + N.
        if self.isolation == "bwrap" and 128 < code < 128 + signal.NSIG:
            return -(code - 128)
        return code

    def _exit_text(self) -> str:
        code = self.exit_code
        if code is None:
            return "did not start"
        if code < 0:
            try:
                return f"was killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"was killed by signal {-code}"
        return f"exited with status {code}"

    def _stderr_text(self) -> str:
        text = self.redactor.redact(self.log.text(), cut_start=self.log.cut)
        text, clipped = clip_utf8_start(text, self.limits.stderr_tail_bytes)
        if self.log.cut or clipped:
            self._notice(
                f"stderr truncated to the last {format_bytes(self.limits.stderr_tail_bytes)}"
            )
        return text

    def _quote(self, label: str, tail: Tail) -> str:
        text = self.redactor.redact(tail.text(), cut_start=tail.cut)
        text, _ = clip_utf8_start(text.strip(), MESSAGE_TAIL_BYTES)
        return f"\n\n{label}:\n{text}" if text else ""

    def _wrote_too_much(self) -> bool:
        """The quota file system is full, or a process died writing past RLIMIT_FSIZE."""
        if quota.exhausted(self.dirs.root) or self.exit_code == -signal.SIGXFSZ:
            return True
        log = self.log.text()
        return any(marker in log for marker in DISK_MARKERS)

    def _ran_out_of_memory(self) -> bool:
        if self.limit_hit == LIMIT_MEMORY or self.oom_kills > 0:
            return True
        log = self.log.text()
        return any(marker in log for marker in OOM_MARKERS)

    def _stop_message(self) -> str:
        grace = format_seconds(self.limits.grace_seconds)
        if self.stop_reason == CANCELLED:
            text = CANCELLED_TEXT
            if self.killed_after_grace:
                text += f"; the tool ignored the abort signal and was killed after {grace}"
        else:
            text = (
                f"Timed out: the tool did not finish within {format_seconds(self.limits.timeout)}"
            )
            if self.killed_after_grace:
                text += f"; it ignored the stop signal and was killed after {grace}"
        return text + "."

    def _failure_message(self) -> str:
        limits = self.limits
        if self.limit_hit == LIMIT_PROCESSES:
            return (
                f"The tool exceeded the process limit ({limits.max_processes} processes) "
                "and was stopped."
            )
        if self.limit_hit == LIMIT_DISK:
            if quota.exhausted(self.dirs.root) == quota.FILES:
                text = (
                    f"The tool created more than {quota.max_files(limits.disk_bytes)} files "
                    f"(the run's disk quota of {limits.disk_mb} MiB allows no more) "
                    "and was stopped."
                )
            else:
                text = (
                    f"The tool wrote more than {limits.disk_mb} MiB (the run's disk quota) "
                    "and was stopped."
                )
            return text + self._quote("Last output", self.log)
        if self._ran_out_of_memory():
            text = f"The tool ran out of memory (limit {limits.memory_mb} MiB) and was stopped."
        elif self.exit_code == 125 and "tool sandbox setup failed" in self.log.text():
            text = "The tool sandbox could not be set up."
        else:
            text = f"The tool process {self._exit_text()} without returning a result."
        return text + self._quote("Last output", self.log)

    def _result_from_message(self, message: dict[str, Any]) -> tuple[Content, bool]:
        content = _valid_content(message.get("content"))
        if content is None:
            return [{"type": "text", "text": "The harness sent a malformed result."}], True
        return self._final_content(
            content, cut=bool(message.get("truncated")), size=int(message.get("size") or 0)
        ), message.get("isError") is True

    def _final_content(self, content: Content, *, cut: bool, size: int) -> Content:
        limit = self.limits.max_result_bytes
        marker = f"\n\n[result truncated at {format_bytes(limit)}]"
        capped, truncated = self._cap(content, limit, cut=cut)
        if not truncated:
            return capped
        capped, _ = self._cap(content, max(0, limit - len(marker)), cut=cut)
        if capped:
            capped[-1]["text"] += marker
        else:
            capped = [{"type": "text", "text": marker.strip()}]
        total = f" (the tool returned {format_bytes(size)})" if size > limit else ""
        self._notice(f"result truncated at {format_bytes(limit)}{total}")
        return capped

    def _bash_result(self) -> tuple[Content, bool]:
        code = self.exit_code
        if code == 0 and self.limit_hit is None:
            stdout = [{"type": "text", "text": self.stdout.text()}]
            return self._final_content(stdout, cut=self.stdout.cut, size=self.stdout.total), False
        if self.limit_hit or self._ran_out_of_memory():
            return [{"type": "text", "text": self._failure_message()}], True
        text = f"The tool {self._exit_text()}."
        text += self._quote("stdout (last lines)", self.stdout_tail)
        text += self._quote("stderr (last lines)", self.log)
        return [{"type": "text", "text": text}], True

    def _status_and_result(self) -> tuple[str, dict[str, Any]]:
        if self.stop_reason is not None:
            content: Content = [{"type": "text", "text": self._stop_message()}]
            if self.result_message is not None:
                content += self._result_from_message(self.result_message)[0]
            return self.stop_reason, {"content": content, "isError": True}
        structured = None  # a result's structuredContent, once it passed its checks
        if self.limit_hit == LIMIT_DISK:  # whatever the tool made of its failed writes
            content, is_error = [{"type": "text", "text": self._failure_message()}], True
        elif self.request.language == "bash":
            content, is_error = self._bash_result()
        elif self.result_message is not None:
            content, is_error = self._result_from_message(self.result_message)
            structured, problem = self._structured(self.result_message, is_error)
            if problem is not None:
                content, is_error = [{"type": "text", "text": problem}, *content], True
        else:
            content, is_error = [{"type": "text", "text": self._failure_message()}], True
        result: dict[str, Any] = {"content": content, "isError": is_error}
        if structured is not None:
            result["structuredContent"] = structured
        return (FAILED if is_error else SUCCEEDED), result

    def _structured(self, message: dict[str, Any], is_error: bool) -> tuple[Any, str | None]:
        """(the result's structuredContent redacted, or None; why the result fails instead).
        What the harness says is not trusted: the tool shares its process."""
        outputs = self.request.outputs
        if "structuredContent" not in message:
            if outputs and not is_error:
                return None, (
                    "The tool declares outputs but its result has no structuredContent: "
                    f"return {{content, structuredContent: {{{', '.join(outputs)}}}}}."
                )
            return None, None
        structured = message["structuredContent"]
        limit = self.limits.max_result_bytes
        why = None
        if not isinstance(structured, dict):
            why = f"it must be an object, got {json_kind(structured)}"
        else:
            try:
                size = len(json.dumps(structured, allow_nan=False).encode("utf-8", "replace"))
            except ValueError:
                why = "it holds NaN or Infinity, which JSON has no way to say"
            else:
                if size > limit:
                    why = f"it is {format_bytes(size)}, over the limit of {format_bytes(limit)}"
        if why is not None:
            return None, f"The tool's structuredContent was refused: {why}."
        structured = _clean_json(structured)
        if outputs and not is_error:
            problems = structured_problems(outputs, structured)
            if problems:
                listed = "; ".join(self.redactor.redact(p) for p in problems[:10])
                more = f" (and {len(problems) - 10} more)" if len(problems) > 10 else ""
                return None, (
                    f"The tool's structuredContent does not match its outputs: {listed}{more}."
                )
        return self.redactor.redact_json(structured), None

    def outcome(self) -> RunOutcome:
        end = self.exited_at if self.exited_at is not None else time.monotonic()
        if self.proc is None:
            status = FAILED
            result = _text_result(self.start_error, is_error=True)
        else:
            status, result = self._status_and_result()
        return RunOutcome(
            status=status,
            result=result,
            stderr_tail=self._stderr_text(),
            artifacts=self.artifacts,
            isolation=self.isolation,
            exit_code=self.exit_code,
            duration=end - self.started,
            notices=self.notices,
            spare=self.used_spare,
            network_policy=self.net_plan.summary,
            cpu_limit=self.cpu_limit(),
        )
