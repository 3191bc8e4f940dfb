"""Sandboxes started before their run is known: bwrap with the node or python harness
waiting on stdin for the run (entry, limits, environment and params, one JSON object).

Every bwrap run of a node or python tool goes through one. A cold run starts its own on
the spot. When a run takes the spare (or, after a cold run, when it ends), a background
thread starts the next *spare* of the same shape, so that the next such run in this
process skips bubblewrap's set-up, the cgroup join (a cgroup v1
migration waits for an RCU grace period, ~10 ms here) and the interpreter's start-up
(~50 ms for node). A typescript tool's files come stripped of their types by the worker
(tsstrip.py), so no sandbox loads Node's type stripper for them.

A spare never ran tool code and holds nothing of a run: fresh cgroups, work dir, /tmp and
processes; the run's variables and params reach it only at hand-over. A run whose shape
(language, network, memory, process and CPU limits, extra binds, the sandbox's command line)
differs from the spare's starts cold. A spare's network (slirp4netns and the egress rules,
network.py) is set up when it starts: its shape includes the egress policy. Tools that
bind host paths (integration files, input folders) never get a spare: a file replaced on
the host since would still show its old inode. One spare per process, discarded after
SPARE_IDLE_SECONDS.
`TOOL_CONSOLE_SPARE_SANDBOXES=off` disables spares (runs then always start cold).
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import logging
import os
import select
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from tools_app.egress import policy as egress_policy
from tools_app.manifest.languages import LANGUAGES

from . import cgroups, procs, quota, sandbox, seccomp, tsstrip
from . import network as tool_network
from .gate import Gate
from .limits import Limits

logger = logging.getLogger(__name__)

# Those with a harness that can wait for its run (node or python); bash runs start cold.
STANDBY_LANGUAGES = tuple(language for language in LANGUAGES if language != "bash")
SPARE_IDLE_SECONDS = 120.0
PREFIX = "spare-"
READY_SECONDS = 20.0
# A run waits for a spare of its shape that is being started as long as that start may
# take: a cold start would do the same work from the beginning, competing for the CPU.
SPARE_WAIT_SECONDS = READY_SECONDS + 1.0
_PLACEHOLDER = Path("/nonexistent/tool-console-spare")


def spares_enabled() -> bool:
    return os.environ.get("TOOL_CONSOLE_SPARE_SANDBOXES", "on").lower() not in ("off", "0", "no")


@dataclass(frozen=True)
class Shape:
    """What a sandbox fixes at start; runs of one shape can use each other's spares."""

    language: str
    network: bool
    memory_mb: int
    max_processes: int
    disk_mb: int
    cpus: float
    ro_binds: tuple[Path, ...]
    folder: Path  # where the sandbox's own directory is made
    command: tuple[str, ...]  # bwrap's and the harness's arguments, for any other change
    # The filtered network's policy, set up when the spare starts (network.py); None: no
    # network or an unfiltered one.
    egress: egress_policy.Policy | None = None

    @classmethod
    def of(
        cls,
        language: str,
        network: bool,
        limits: Limits,
        ro_binds,
        folder: Path,
        policy: egress_policy.Policy | None = None,
    ) -> Shape:
        fields = (language, network, limits, tuple(Path(p) for p in ro_binds))
        command = _argv(*fields, _PLACEHOLDER, notices=[], filtered=policy is not None)
        return cls(
            language,
            network,
            limits.memory_mb,
            limits.max_processes,
            limits.disk_mb,
            limits.cpus,
            fields[3],
            folder,
            tuple(command),
            policy,
        )

    @property
    def limits(self) -> Limits:
        return Limits(
            memory_mb=self.memory_mb,
            max_processes=self.max_processes,
            disk_mb=self.disk_mb,
            cpus=self.cpus,
        )


def _argv(
    language: str,
    network: bool,
    limits: Limits,
    ro_binds: tuple[Path, ...],
    root: Path,
    *,
    notices: list[str],
    filtered: bool = False,
) -> list[str]:
    paths = sandbox.tool_paths("bwrap", root / "tool", quota.home(root), quota.tmp(root))
    outer = sandbox.bwrap_argv(
        language=language,
        network=network,
        tool_dir=root / "tool",
        home=quota.home(root),
        limits=limits,
        ro_binds=ro_binds,
        notices=notices,
        resolv_conf=tool_network.RESOLV_CONF if filtered else None,
        stripped=root / "js" if language == "typescript" else None,
    )
    return outer + sandbox.tool_argv(language, None, paths, limits)


def paths() -> sandbox.ToolPaths:
    """Where a standby sandbox's tool sees its folders."""
    return sandbox.tool_paths("bwrap", _PLACEHOLDER, _PLACEHOLDER, _PLACEHOLDER)


class Sandbox:
    """A started sandbox waiting for its run. `root` holds tool/ (bound read-only at
    /tool), for typescript js/ (the tool's stripped files, bound read-only at
    sandbox.SANDBOX_JS, tsstrip.py) and disk/ (the disk quota, quota.py) with home/ (the
    work dir, with home/output) and tmp/."""

    def __init__(self, shape: Shape, root: Path, env: dict[str, str], notices: list[str]) -> None:
        self.shape = shape
        self.root = root
        self.env = env
        self.notices = notices
        self.created = time.monotonic()
        self.proc: subprocess.Popen[bytes] | None = None
        self.cgroup: cgroups.RunCgroup | None = None
        self.net: tool_network.Network | None = None
        self.stdin_w = self.log_r = self.protocol_r = -1

    @classmethod
    def start(
        cls, shape: Shape, root: Path, env: dict[str, str], *, wait_ready: bool = False
    ) -> Sandbox:
        """Make `root` and start the sandbox in it; with `wait_ready`, return once the
        harness waits for its run (bwrap has made its mounts: `root` may be renamed).
        Raises OSError or RuntimeError, having cleaned up, if that is impossible."""
        root.mkdir(mode=0o700, exist_ok=True)
        (root / "tool").mkdir(mode=0o755, exist_ok=True)
        if shape.language == "typescript":
            (root / "js").mkdir(mode=0o755, exist_ok=True)
        box = cls(shape, root, env, [])
        try:
            quota.prepare(root, shape.limits.disk_bytes)
            box._start()
            if wait_ready:
                box._wait_ready()
        except BaseException:
            box.discard()
            raise
        return box

    def _wait_ready(self) -> None:
        """Read the harness's {"type": "ready"} line off the protocol pipe."""
        deadline = time.monotonic() + READY_SECONDS
        data = b""
        while not data.endswith(b"\n"):
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([self.protocol_r], [], [], remaining)[0]:
                raise OSError(f"the standby harness was not ready within {READY_SECONDS:g} s")
            try:
                chunk = os.read(self.protocol_r, 256)
            except BlockingIOError:
                continue
            if not chunk:
                raise OSError("the standby harness exited before it was ready")
            data += chunk
        if json.loads(data) != {"type": "ready"}:
            raise OSError(f"the standby harness said {data[:200]!r} instead of ready")

    def _start(self) -> None:
        shape = self.shape
        limits = shape.limits
        argv = _argv(
            shape.language,
            shape.network,
            limits,
            shape.ro_binds,
            self.root,
            notices=self.notices,
            filtered=shape.egress is not None,
        )
        tasks = limits.max_processes + cgroups.TASK_ALLOWANCE
        self.cgroup = cgroups.create(limits.memory_bytes, tasks, limits.cpu_quota_us)
        gate = Gate()
        self.protocol_r = gate.protocol_r
        stdin_r, self.stdin_w = os.pipe()
        self.log_r, log_w = os.pipe()
        filter_fd = -1
        try:
            argv, filter_fd = seccomp.attach(argv)
            self.proc = gate.popen(
                argv,
                stdin=stdin_r,
                stdout=log_w,
                stderr=log_w,
                env=self.env,
                cwd=quota.home(self.root),
                extra_fds=(filter_fd,),
                prefix=tool_network.gate_prefix(
                    self.root, limits.disk_bytes, filtered=shape.egress is not None
                ),
            )
            rootless = sandbox.rootless()
            if rootless:  # the quota is mounted in the sandbox's namespaces: reach it
                quota.pin(self.root, self.proc.pid)
            if shape.egress is not None:
                self.net = tool_network.Network.attach(
                    self.proc.pid, shape.egress, rootless=rootless
                )
            gate.open(self.proc, self.cgroup, sandbox.rlimits(shape.language, limits))
            if self.net is not None:
                # The harness boots meanwhile; it runs no tool code before its message.
                self.net.ready()
        except BaseException:
            self.protocol_r = -1
            gate.close()
            raise
        finally:
            os.close(stdin_r)
            os.close(log_w)
            if filter_fd >= 0:
                os.close(filter_fd)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def move_to(self, work_root: Path | None) -> bool:
        """Rename the sandbox's directory to a run dir under `work_root` (bind mounts
        follow the directory, not its name). False if it cannot be moved there."""
        if work_root is None:
            return True
        target = Path(work_root) / f"run-{uuid.uuid4().hex}"
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            os.rename(self.root, target)
        except OSError:
            return False
        self.root = target
        return True

    def fill(self, tool_dir: Path) -> None:
        """Put the tool's files into tool/ (hard links where possible)."""
        source = Path(tool_dir)
        target = self.root / "tool"
        for folder, dirs, files in os.walk(source):
            relative = Path(folder).relative_to(source)
            for name in dirs:
                (target / relative / name).mkdir(exist_ok=True)
            for name in files:
                src, dst = Path(folder) / name, target / relative / name
                try:
                    os.link(src, dst, follow_symlinks=False)
                except OSError:
                    shutil.copy2(src, dst, follow_symlinks=False)

    def fill_stripped(self, entries: dict[PurePosixPath, Path]) -> dict[str, str]:
        """Copy a typescript tool's stripped files (tsstrip.prepare) into js/; what the
        harness loads in place of which .ts file, as the sandbox sees them."""
        if self.shape.language != "typescript" or not entries:
            return {}
        return tsstrip.copy_into(entries, self.root / "js", sandbox.SANDBOX_JS)

    def message(
        self,
        entry: str,
        limits: Limits,
        env: dict[str, str],
        params: dict,
        stripped: dict[str, str] | None = None,
    ) -> bytes:
        """What the waiting harness reads: only the variables that differ from its own."""
        changed = {name: value for name, value in env.items() if self.env.get(name) != value}
        return json.dumps(
            {
                "entry": f"{sandbox.SANDBOX_TOOL}/{entry}",
                "config": sandbox.harness_config(limits),
                "env": changed,
                "params": params,
                "stripped": stripped or {},
            },
            default=str,
        ).encode()

    def release_fds(self) -> tuple[int, int, int]:
        """(stdin_w, log_r, protocol_r), now owned by the caller."""
        fds = (self.stdin_w, self.log_r, self.protocol_r)
        self.stdin_w = self.log_r = self.protocol_r = -1
        return fds

    def close_fds(self) -> None:
        for fd in self.release_fds():
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        if self.net is not None:
            self.net.close_fd()

    def discard(self) -> None:
        """Kill it and remove its cgroups and directory."""
        self.close_fds()
        if self.cgroup is not None:
            self.cgroup.kill()
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()  # bwrap: the whole PID namespace goes with it
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(5)
        if self.cgroup is not None:
            self.cgroup.remove()
        if self.net is not None:
            self.net.close()
        quota.release(self.root)
        shutil.rmtree(self.root, ignore_errors=True)


def base_env() -> dict[str, str]:
    """The environment a spare starts with; the run's own variables come at hand-over."""
    return sandbox.tool_env(paths(), "", {}, {}, [])


class _Keeper:
    """Holds this process's spare and starts the next one on its own thread: bwrap's
    --die-with-parent fires when the *thread* that started it ends, so spares are started
    by one thread that lives as long as the process."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.spare: Sandbox | None = None
        self.wanted: Shape | None = None
        self.making: Shape | None = None
        self.trash: list[Sandbox] = []
        self.thread: threading.Thread | None = None
        self.swept: set[Path] = set()  # folders swept when the first spare was made there

    def take(self, shape: Shape) -> Sandbox | None:
        """The spare if it has this shape and is alive (waiting for one of this shape that
        is being started: less work left than a cold start), else None."""
        deadline = time.monotonic() + SPARE_WAIT_SECONDS
        with self.cond:
            # (A spare of another shape is about to be replaced by one of this shape.)
            while (self.spare is None or self.spare.shape != shape) and (
                self.making == shape or (self.wanted == shape and self.making is None)
            ):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self.cond.wait(remaining)
            spare = self.spare
            if spare is None or spare.shape != shape:
                return None
            self.spare = None
            if spare.alive() and time.monotonic() - spare.created < SPARE_IDLE_SECONDS:
                # The next one starts now, while this run goes on: a run that waits (a
                # sleep, I/O) overlaps it, and a burst of runs does not wait for it each time.
                self.wanted = shape
                self.cond.notify_all()
                return spare
            self.trash.append(spare)
            self.cond.notify_all()
        return None

    def want(self, shape: Shape) -> None:
        """Have a spare of this shape ready for the next run (replacing any other)."""
        with self.cond:
            if self.spare is not None and self.spare.shape == shape:
                return
            self.wanted = shape
            if self.thread is None:
                self.thread = threading.Thread(target=self._loop, name="spare-sandbox", daemon=True)
                self.thread.start()
            self.cond.notify_all()

    def discard(self) -> None:
        """Drop the spare now (tests; shutdown)."""
        with self.cond:
            self.wanted = None
            while self.making is not None:
                self.cond.wait(1)
            spare, self.spare = self.spare, None
            folders = sorted(f for f in self.swept if f.is_dir())
            self.swept.intersection_update(folders)
        if spare is not None:
            spare.discard()
        # Again on the way out: the pool processes of a worker killed with SIGKILL may
        # outlive it for a while, so the first sweep of the next worker still saw them alive.
        if folders:
            quota.sweep(again=True)
        for folder in folders:
            _sweep(folder, quotas=False)

    def after_fork_in_child(self) -> None:
        """A forked child must not hold the spare's pipes: its harness would never see the
        end of its stdin. The spare itself stays the parent's."""
        spare = self.spare
        self.__init__()
        if spare is not None:
            spare.close_fds()

    def _next_job(self) -> tuple[list[Sandbox], Shape | None]:
        with self.cond:
            while True:
                if self.spare is not None:
                    idle = time.monotonic() - self.spare.created
                    if idle >= SPARE_IDLE_SECONDS or not self.spare.alive():
                        self.trash.append(self.spare)
                        self.spare = None
                wanted = self.wanted
                if wanted is not None and self.spare is not None:
                    if self.spare.shape == wanted:  # asked for while it was being started
                        wanted = self.wanted = None
                    else:
                        self.trash.append(self.spare)
                        self.spare = None
                if self.trash or wanted is not None:
                    trash, self.trash = self.trash, []
                    self.wanted = None
                    self.making = wanted
                    return trash, wanted
                timeout = None
                if self.spare is not None:
                    timeout = max(0.1, SPARE_IDLE_SECONDS - (time.monotonic() - self.spare.created))
                self.cond.wait(timeout)

    def _loop(self) -> None:
        while True:
            trash, shape = self._next_job()
            for box in trash:
                box.discard()
            made = None
            if shape is not None:
                root = shape.folder / f"{PREFIX}{_owner()}-{uuid.uuid4().hex}"
                try:
                    shape.folder.mkdir(parents=True, exist_ok=True)
                    with self.cond:
                        first = shape.folder not in self.swept
                        self.swept.add(shape.folder)
                    if first:
                        _sweep(shape.folder)
                    made = Sandbox.start(shape, root, base_env(), wait_ready=True)
                except Exception:
                    logger.exception("could not start a spare sandbox")
            with self.cond:
                self.making = None
                if made is not None:
                    if self.spare is None and self.wanted in (None, shape):
                        self.spare = made
                    else:
                        self.trash.append(made)
                self.cond.notify_all()


def _owner(pid: int | None = None) -> str:
    """`<host>.<pid>` of the process that keeps a spare: its folder is named after it."""
    host = hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]
    return f"{host}.{os.getpid() if pid is None else pid}"


def _owner_is_dead(name: str) -> bool:
    """Whether the folder's owner was a process of this host that no longer exists (a
    worker killed with SIGKILL cannot discard its spare)."""
    host, _, pid = name.removeprefix(PREFIX).partition("-")[0].partition(".")
    if not pid.isdigit() or _owner(int(pid)) != f"{host}.{pid}":
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return _is_zombie(int(pid))


def _is_zombie(pid: int) -> bool:
    """An exited process its parent has not reaped yet: dead, holding nothing. A killed
    worker's pool processes stay so under an init that reaps slowly or not at all (a
    container's or a PID namespace's first process), and signal 0 still reaches them."""
    proc = procs.read_proc(pid)
    return proc is not None and proc.state == "Z"


def _sweep(folder: Path, *, quotas: bool = True) -> None:
    """Remove spare directories of processes that died without discarding them: their
    owner is gone, or (another host's, or a pid reused) they are older than a live spare
    ever is (SPARE_IDLE_SECONDS)."""
    if quotas:
        quota.sweep()  # their disk quotas first: a mount point cannot be removed
    cutoff = time.time() - 2 * SPARE_IDLE_SECONDS
    for path in folder.glob(f"{PREFIX}*"):
        with contextlib.suppress(OSError):
            if _owner_is_dead(path.name) or path.lstat().st_mtime < cutoff:
                shutil.rmtree(path, ignore_errors=True)


_keeper = _Keeper()
os.register_at_fork(after_in_child=_keeper.after_fork_in_child)
atexit.register(_keeper.discard)


def shape_for(
    language: str,
    network: bool,
    limits: Limits,
    ro_binds,
    work_root: Path | None,
    policy: egress_policy.Policy | None = None,
) -> Shape | None:
    """The shape of a run that starts in a standby sandbox, or None (bash; no bwrap; no
    interpreter, which the cold path reports)."""
    if language not in STANDBY_LANGUAGES or sandbox.isolation_level()[0] != "bwrap":
        return None
    folder = Path(work_root).parent if work_root is not None else Path(tempfile.gettempdir())
    try:
        return Shape.of(language, network, limits, ro_binds, folder, policy)
    except RuntimeError:
        return None


def take(shape: Shape) -> Sandbox | None:
    if shape.ro_binds or not spares_enabled():
        return None
    return _keeper.take(shape)


def prepare(shape: Shape) -> None:
    """After a run of this shape: start a spare for the next one, in the background."""
    if shape.ro_binds or not spares_enabled():
        return
    _keeper.want(shape)


def discard_spare() -> None:
    _keeper.discard()
