"""Per-run cgroups for the memory, process and CPU limits, where the host lets us make them.

A run gets a child of the console's own cgroup, in cgroup v1 (one directory per controller)
or v2 (one directory). The launcher joins it before it execs anything, so every process the
tool starts is counted. Where cgroups are missing or read-only, the runner falls back to
rlimits plus a watchdog (see core.py); the CPU limit has no such fallback (RLIMIT_CPU kills
rather than slows), so a run without a cpu cgroup says so in a notice.
`TOOL_CONSOLE_CGROUPS=off` disables them.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from . import procs
from .limits import CPU_PERIOD_US

CONTROLLERS = ("memory", "pids", "cpu")
# pids cgroups count threads, and node alone runs ~11; bwrap adds two helper processes.
TASK_ALLOWANCE = 32
PREFIX = "tool-console-run-"
# A run's cgroup left behind by a killed worker is removed once it is this old and empty
# (a live run joins its cgroup within milliseconds of creating it).
STALE_SECONDS = 600

# Controllers that failed once in this process are not tried again: the host won't change.
_broken: set[str] = set()
_swept: set[Path] = set()


@dataclass(frozen=True)
class _Hierarchy:
    version: int  # 1 or 2
    own_dir: Path  # this process's cgroup in that hierarchy


def _mounts() -> list[tuple[str, Path, str, set[str]]]:
    """(fstype, mount point, mount root, super options) of every cgroup mount."""
    found = []
    with open("/proc/self/mountinfo") as mountinfo:
        for line in mountinfo:
            left, _, right = line.partition(" - ")
            fields, tail = left.split(), right.split()
            if len(fields) >= 5 and len(tail) >= 3 and tail[0] in ("cgroup", "cgroup2"):
                found.append((tail[0], Path(fields[4]), fields[3], set(tail[2].split(","))))
    return found


def _own_paths() -> dict[str, str]:
    """Controller (or "" for v2) -> this process's cgroup path."""
    paths: dict[str, str] = {}
    with open("/proc/self/cgroup") as cgroup_file:
        for line in cgroup_file:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            for controller in controllers.split(",") if controllers else [""]:
                paths[controller] = path
    return paths


def _inside(mount_point: Path, root: str, path: str) -> Path | None:
    if root != "/" and not (path == root or path.startswith(root + "/")):
        return None  # our cgroup is not visible under this mount
    relative = path[len(root) :] if root != "/" else path
    return mount_point / relative.lstrip("/")


@functools.cache
def _hierarchies() -> dict[str, _Hierarchy]:
    """Controller -> where its per-run cgroups go; empty when cgroups are unusable."""
    try:
        mounts, own = _mounts(), _own_paths()
    except (OSError, ValueError):
        return {}
    found: dict[str, _Hierarchy] = {}
    for fstype, point, root, options in mounts:
        for controller in CONTROLLERS:
            if fstype != "cgroup" or controller not in options or controller not in own:
                continue
            if (own_dir := _inside(point, root, own[controller])) is not None:
                found[controller] = _Hierarchy(1, own_dir)
    for fstype, point, root, _ in mounts:
        if fstype != "cgroup2" or "" not in own:
            continue
        own_dir = _inside(point, root, own[""])
        try:
            available = (point / "cgroup.controllers").read_text().split()
        except OSError:
            continue
        for controller in CONTROLLERS:
            if controller in available and controller not in found and own_dir is not None:
                found[controller] = _Hierarchy(2, own_dir)
    return found


def enabled() -> bool:
    return os.environ.get("TOOL_CONSOLE_CGROUPS", "auto").lower() not in ("off", "0", "no")


def _write(path: Path, value: str) -> None:
    with open(path, "w") as handle:
        handle.write(value)


def _read_counter(path: Path, key: str) -> int:
    """The value of `key` in a flat-keyed cgroup file ("oom_kill 2"), 0 if absent."""
    try:
        for line in path.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    except (OSError, ValueError):
        pass
    return 0


class RunCgroup:
    """The cgroup directories of one run, by controller (both may be the same v2 dir)."""

    def __init__(self, dirs: dict[str, tuple[int, Path]]) -> None:
        self._dirs = dirs

    @property
    def limits_memory(self) -> bool:
        return "memory" in self._dirs

    @property
    def limits_processes(self) -> bool:
        return "pids" in self._dirs

    @property
    def limits_cpu(self) -> bool:
        return "cpu" in self._dirs

    def cpu_throttled(self) -> bool:
        """Whether the CPU limit slowed the run down at least once."""
        if "cpu" not in self._dirs:
            return False
        return _read_counter(self._dirs["cpu"][1] / "cpu.stat", "nr_throttled") > 0

    @property
    def procs_files(self) -> list[str]:
        return sorted({str(path / "cgroup.procs") for _, path in self._dirs.values()})

    def members(self) -> set[int]:
        pids: set[int] = set()
        for procs_file in self.procs_files:
            with contextlib.suppress(OSError, ValueError):
                pids |= {int(pid) for pid in Path(procs_file).read_text().split()}
        return pids

    def process_limit_hit(self) -> bool:
        """Whether a fork or clone failed for the pids limit."""
        if "pids" not in self._dirs:
            return False
        return _read_counter(self._dirs["pids"][1] / "pids.events", "max") > 0

    def oom_kills(self) -> int:
        if "memory" not in self._dirs:
            return 0
        version, path = self._dirs["memory"]
        name = "memory.events" if version == 2 else "memory.oom_control"
        return _read_counter(path / name, "oom_kill")

    def kill(self) -> None:
        for version, path in self._dirs.values():
            if version == 2 and (path / "cgroup.kill").exists():
                with contextlib.suppress(OSError):
                    _write(path / "cgroup.kill", "1")
        procs.send(self.members(), signal.SIGKILL)

    def remove(self) -> None:
        """Kill what is left and remove the directories (retrying while tasks exit)."""
        for path in {path for _, path in self._dirs.values()}:
            for _ in range(100):
                try:
                    path.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    self.kill()
                    time.sleep(0.01)


def _sweep(own_dir: Path) -> None:
    """Once per process and hierarchy: remove stale, empty run cgroups."""
    if own_dir in _swept:
        return
    _swept.add(own_dir)
    cutoff = time.time() - STALE_SECONDS
    for path in own_dir.glob(f"{PREFIX}*"):
        with contextlib.suppress(OSError):
            if path.stat().st_mtime < cutoff and not (path / "cgroup.procs").read_text().strip():
                path.rmdir()


def _make(controller: str, hierarchy: _Hierarchy, name: str, limits: dict[str, int]) -> Path:
    path = hierarchy.own_dir / name
    if hierarchy.version == 2 and not (path / f"{controller}.max").exists():
        # v2 shows a controller's files only when the parent delegates it.
        _write(hierarchy.own_dir / "cgroup.subtree_control", f"+{controller}")
    path.mkdir(exist_ok=True)
    if controller == "pids":
        _write(path / "pids.max", str(limits["pids"]))
    elif controller == "cpu" and hierarchy.version == 1:
        _write(path / "cpu.cfs_period_us", str(CPU_PERIOD_US))
        _write(path / "cpu.cfs_quota_us", str(_v1_quota(hierarchy.own_dir, limits["cpu"])))
    elif controller == "cpu":
        _write(path / "cpu.max", f"{limits['cpu']} {CPU_PERIOD_US}")
    elif hierarchy.version == 1:
        _write(path / "memory.limit_in_bytes", str(limits["memory"]))
        if (path / "memory.memsw.limit_in_bytes").exists():
            _write(path / "memory.memsw.limit_in_bytes", str(limits["memory"]))
    else:
        _write(path / "memory.max", str(limits["memory"]))
        if (path / "memory.swap.max").exists():
            _write(path / "memory.swap.max", "0")
    return path


def _v1_quota(parent: Path, quota_us: int) -> int:
    """cgroup v1 refuses a child quota above its parent's (v2 takes the lower of the two):
    within a CPU-limited worker (a container's --cpus), take the parent's share at most."""
    try:
        parent_quota = int((parent / "cpu.cfs_quota_us").read_text())
        parent_period = int((parent / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return quota_us
    if parent_quota <= 0 or parent_period <= 0:  # -1: unlimited
        return quota_us
    return min(quota_us, parent_quota * CPU_PERIOD_US // parent_period)


def create(memory_bytes: int, max_tasks: int, cpu_quota_us: int) -> RunCgroup | None:
    """A fresh cgroup with these limits (CPU: microseconds per CPU_PERIOD_US), or None
    where the host offers none."""
    if not enabled():
        return None
    name = f"{PREFIX}{uuid.uuid4().hex[:16]}"
    limits = {"memory": memory_bytes, "pids": max_tasks, "cpu": cpu_quota_us}
    dirs: dict[str, tuple[int, Path]] = {}
    for controller, hierarchy in _hierarchies().items():
        if controller in _broken:
            continue
        _sweep(hierarchy.own_dir)
        try:
            dirs[controller] = (hierarchy.version, _make(controller, hierarchy, name, limits))
        except OSError:
            _broken.add(controller)
            path = hierarchy.own_dir / name
            if all(used != path for _, used in dirs.values()):
                with contextlib.suppress(OSError):
                    path.rmdir()
    return RunCgroup(dirs) if dirs else None


def cpu_unlimited_reason(cgroup: RunCgroup | None) -> str:
    """Why a run with this cgroup has no CPU limit ("" when it has one)."""
    if cgroup is not None and cgroup.limits_cpu:
        return ""
    if not enabled():
        return "cgroups are disabled by TOOL_CONSOLE_CGROUPS"
    if "cpu" in _broken:
        return "the worker could not make a cpu cgroup here"
    if "cpu" not in _hierarchies():
        return "the worker's cgroup has no cpu controller it may use"
    return "the worker could not make a cgroup for the run"


def probe_cpu() -> str:
    """Why runs of this process get no CPU limit ("" when they do), by making and removing
    one cpu cgroup: a non-root worker sees the controller but may not write to it."""
    if not enabled() or "cpu" in _broken or "cpu" not in _hierarchies():
        return cpu_unlimited_reason(None)
    hierarchy = _hierarchies()["cpu"]
    path = hierarchy.own_dir / f"{PREFIX}probe-{uuid.uuid4().hex[:8]}"
    try:
        _make("cpu", hierarchy, path.name, {"cpu": CPU_PERIOD_US})
    except OSError:
        _broken.add("cpu")
        return cpu_unlimited_reason(None)
    finally:
        with contextlib.suppress(OSError):
            path.rmdir()
    return ""


def describe() -> str:
    """E.g. "memory: cgroup v1, pids: cgroup v1, cpu: cgroup v1", for diagnostics."""
    if not enabled():
        return "disabled by TOOL_CONSOLE_CGROUPS"
    found = _hierarchies()
    parts = [
        f"{c}: cgroup v{found[c].version}" if c in found and c not in _broken else f"{c}: none"
        for c in CONTROLLERS
    ]
    return ", ".join(parts)
