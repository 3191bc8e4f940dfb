"""The disk quota of a run: CONSOLE_RUNNER_DISK_MB over everything the tool can write.

A run's (or spare's) directory holds `disk/`, and everything writable lives in it:
`disk/home` (HOME, the work dir, bound at /home/tool), `disk/home/output`
(TOOL_OUTPUT_DIR) and `disk/tmp` (bound at /tmp). When the worker is root, `disk/` is a
tmpfs of exactly the quota mounted on the host (nosuid, nodev, a capped inode count), so a
tool that writes more gets ENOSPC, the runner sees the file system full and fails the run
with a message saying so, and the runner can still read the artifacts after the sandbox is
gone. The mount is on `disk/`, never on the run's directory itself: a spare's directory
is renamed into its run's work dir at hand-over, and a mount point cannot be renamed (a
directory holding one can). Cleanup unmounts it (lazily: the sandbox may still be dying);
each mount's source names the worker process that made it, so a worker that died without
cleaning up has its mounts swept by the next process that prepares a run.

tmpfs pages are memory: files a tool writes count against its memory cgroup too.

A worker that is not root cannot mount on the host, so (where user namespaces work, see
sandbox.rootless()) the sandbox's first process starts in a user and mount namespace of its
own and mounts the same tmpfs on `disk/` there (MOUNT_SCRIPT), before the gate opens. The
host's `disk/` stays an empty directory: the tool's writes never reach the host's disk. The
runner pins that tmpfs with a descriptor opened through /proc/<pid>/root (pin()), and
reads it, artifacts included, through that descriptor (view()) after the sandbox is gone:
an open descriptor keeps a file system alive once its namespace has ended. release()
closes it, which frees the tmpfs.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import time
from pathlib import Path

from . import privilege, procs

WRITABLE = "disk"
SOURCE = "tool-console-quota"
MS_NOSUID = 2
MS_NODEV = 4
MNT_DETACH = 2
# Bytes of quota per inode: 512 MiB allows 128 Ki files (each costs kernel memory).
BYTES_PER_INODE = 4096
SPACE, FILES = "space", "files"  # what ran out
SANDBOX_TMP = "/tmp"  # noqa: S108 - the sandbox's own, inside the quota

_swept = False
# (st_dev, st_ino) of a run's host disk/ -> a descriptor on the tmpfs mounted over it in
# the sandbox's own mount namespace (a worker that is not root). Keyed by inode: a spare's
# directory is renamed at hand-over.
_pinned: dict[tuple[int, int], int] = {}
# Run by the sandbox's first process, in its own user and mount namespace: $1 disk/,
# $2 bytes, $3 inodes, then the command to exec (the gate shell).
MOUNT_SCRIPT = (
    'd=$1; o="size=$2,nr_inodes=$3,mode=0711,nosuid,nodev"; shift 3; '
    '/bin/mount -n -t tmpfs -o "$o" tool-console-quota "$d" && /bin/mkdir -m 0711 "$d/home" && '
    '/bin/mkdir -m 0755 "$d/home/output" && /bin/mkdir -m 1777 "$d/tmp" || exit 125; exec "$@"'
)
PIN_SECONDS = 10.0


def writable(root: Path) -> Path:
    return root / WRITABLE


def home(root: Path) -> Path:
    return root / WRITABLE / "home"


def tmp(root: Path) -> Path:
    return root / WRITABLE / "tmp"


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


@functools.cache
def _owner() -> str:
    """This process as "<pid>-<start time>": a pid alone may be reused."""
    return f"{os.getpid()}-{_start_time(os.getpid())}"


def _start_time(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rpartition(")")[2].split()[19]


def _mount(target: Path, size: int) -> None:
    options = f"size={size},nr_inodes={max_files(size)},mode=0711"
    source = f"{SOURCE}-{_owner()}"
    libc = _libc()
    if libc.mount(source.encode(), str(target).encode(), b"tmpfs", MS_NOSUID | MS_NODEV,
                  options.encode()) != 0:  # fmt: skip
        error = ctypes.get_errno()
        raise OSError(error, f"cannot mount the run's disk quota at {target}: {os.strerror(error)}")


def _unmount(target: Path | str) -> None:
    _libc().umount2(str(target).encode(), MNT_DETACH)


def prepare(root: Path, disk_bytes: int) -> None:
    """Make `root`/disk with home, home/output and tmp, the run uid's. When the worker is
    root, disk/ is a tmpfs of `disk_bytes`. Raises OSError, having cleaned up."""
    sweep()
    disk = writable(root)
    disk.mkdir(mode=0o711)
    try:
        if privilege.worker_is_root():
            _mount(disk, disk_bytes)
        # home 0711: bwrap, root without capabilities by then, must chdir into it.
        modes = ((home(root), 0o711), (home(root) / "output", 0o755), (tmp(root), 0o1777))
        for path, mode in modes:
            path.mkdir()
            privilege.give(path, mode)
    except BaseException:
        release(root)
        raise


def mount_prefix(root: Path, disk_bytes: int) -> list[str]:
    """Arguments of `/bin/sh` that mount the quota in the sandbox's own namespaces, then
    exec what follows (see MOUNT_SCRIPT)."""
    disk = os.path.abspath(writable(root))
    return ["-c", MOUNT_SCRIPT, "tool-disk", disk, str(disk_bytes), str(max_files(disk_bytes))]


def _key(root: Path) -> tuple[int, int] | None:
    try:
        info = os.stat(writable(root), follow_symlinks=False)
    except OSError:
        return None
    return info.st_dev, info.st_ino


def pin(root: Path, pid: int) -> None:
    """Wait until process `pid` (running MOUNT_SCRIPT) has mounted the quota over `root`'s
    disk/ in its mount namespace and made its directories, and keep a descriptor on it.
    Raises OSError."""
    disk = writable(root)
    key = _key(root)
    if key is None:
        raise OSError(f"tool sandbox setup failed: {disk} is missing")
    target = f"/proc/{pid}/root{os.path.abspath(disk)}"
    deadline = time.monotonic() + PIN_SECONDS
    while True:
        try:
            fd = os.open(target, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as exc:
            raise OSError(
                f"tool sandbox setup failed: the run's disk quota could not be mounted ({exc})"
            ) from None
        # The mount alone is not enough: the caller writes into home/ at once (input
        # files, output dirs), and the script makes tmp/ last.
        if os.fstat(fd).st_dev != key[0] and _made(fd):
            _pinned[key] = fd
            return
        os.close(fd)
        if time.monotonic() > deadline:
            raise OSError("tool sandbox setup failed: the run's disk quota was not mounted")
        time.sleep(0.0005)


def _made(fd: int) -> bool:
    try:
        os.stat("tmp", dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def _forget_pins_in_child() -> None:
    """A forked child does not own its parent's runs or spare: holding their tmpfs open
    would keep its memory in use after the parent released it."""
    for fd in _pinned.values():
        with contextlib.suppress(OSError):
            os.close(fd)
    _pinned.clear()


os.register_at_fork(after_in_child=_forget_pins_in_child)


def pinned(root: Path) -> bool:
    """Whether the runner holds the run's quota file system (a rootless run, once started)."""
    key = _key(root)
    return key is not None and key in _pinned


def view(root: Path) -> Path:
    """Where the runner reads and writes the run's disk/ (home, output, tmp)."""
    key = _key(root)
    if key is not None and key in _pinned:
        return Path(f"/proc/self/fd/{_pinned[key]}")
    return writable(root)


def release(root: Path) -> None:
    """Unmount the run's quota file system (its files go with it); a no-op without one."""
    key = _key(root)
    if key is not None and (fd := _pinned.pop(key, None)) is not None:
        os.close(fd)
        return
    disk = writable(root)
    if os.path.ismount(disk):
        _unmount(disk)


def exhausted(root: Path) -> str | None:
    """SPACE or FILES when the run's quota file system has no block or no inode left;
    None otherwise and without one."""
    disk = writable(root)
    try:
        key = _key(root)
        if key is not None and key in _pinned:
            info = os.fstatvfs(_pinned[key])
        elif not os.path.ismount(disk):
            return None
        else:
            info = os.statvfs(disk)
    except OSError:
        return None
    if info.f_bfree == 0:
        return SPACE
    return FILES if info.f_ffree == 0 else None


def max_files(disk_bytes: int) -> int:
    return max(1024, disk_bytes // BYTES_PER_INODE)


def bwrap_tmp_args(home_dir: Path, disk_bytes: int, *, rootless: bool = False) -> list[str]:
    """The sandbox's /tmp: tmp/ beside `home_dir` inside the quota when there is one,
    else a tmpfs capped at the quota."""
    if privilege.worker_is_root() or rootless:
        return ["--bind", str(home_dir.parent / "tmp"), SANDBOX_TMP]
    return ["--size", str(disk_bytes), "--tmpfs", SANDBOX_TMP]


def _unescape(field: str) -> str:
    """mountinfo escapes space, tab, newline and backslash as \\ooo."""
    out, index = [], 0
    while index < len(field):
        if field[index] == "\\" and field[index + 1 : index + 4].isdigit():
            out.append(chr(int(field[index + 1 : index + 4], 8)))
            index += 4
        else:
            out.append(field[index])
            index += 1
    return "".join(out)


def _alive(owner: str) -> bool:
    """Whether the quota's worker process still runs. A zombie (exited, not reaped: a killed
    worker's pool process under an init that never reaps) is dead, though /proc still
    shows it: its mount must go, or the spare folder under it can never be removed."""
    pid, _, started = owner.partition("-")
    try:
        proc = procs.read_proc(int(pid))
        return proc is not None and proc.state != "Z" and _start_time(int(pid)) == started
    except (OSError, ValueError, IndexError):
        return False


def stale_mounts() -> list[str]:
    """Mount points of quota file systems whose worker process is gone."""
    found = []
    with open("/proc/self/mountinfo") as mountinfo:
        for line in mountinfo:
            left, _, right = line.partition(" - ")
            fields, tail = left.split(), right.split()
            if len(fields) < 5 or len(tail) < 2 or tail[0] != "tmpfs":
                continue
            if tail[1].startswith(f"{SOURCE}-") and not _alive(tail[1][len(SOURCE) + 1 :]):
                found.append(_unescape(fields[4]))
    return found


def sweep(*, again: bool = False) -> None:
    """Once per process (and `again` on its way out): unmount the quotas of workers that
    died without cleaning up."""
    global _swept
    if (_swept and not again) or not privilege.worker_is_root():
        return
    _swept = True
    with contextlib.suppress(OSError):
        for mount_point in stale_mounts():
            _unmount(mount_point)
