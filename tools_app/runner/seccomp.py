"""The seccomp filter every bwrap sandbox runs under (bwrap --seccomp FD).

Default allow; the system calls below fail with EPERM: they reach kernel surfaces a tool
never needs (mounts, modules, kexec, BPF, perf, userfaultfd, keyrings, other processes'
memory, file handles) and are where sandbox escapes usually start. New user namespaces are
refused too (unshare and clone with CLONE_NEWUSER): inside one, an unprivileged process
gains every capability over that namespace's objects. clone3 passes its flags in memory,
which seccomp cannot inspect, so it fails with ENOSYS and libc falls back to clone (what
Docker and Flatpak do). Other architectures' system call ABIs (e.g. int 0x80 on x86-64)
kill the process: libseccomp's default for a filter of the native architecture only.

The filter is compiled once per process with libseccomp (the `pyseccomp` ctypes binding
to the system's libseccomp2) and handed to each bwrap through a memfd. The filter is
applied by bwrap right before it execs the sandbox's first command (setpriv when the
worker is root, see privilege.py), so bwrap's own set-up is not filtered.
"""

from __future__ import annotations

import errno
import fcntl
import functools
import os
import tempfile

DENIED = (
    "mount",
    "umount",
    "umount2",
    "pivot_root",
    "swapon",
    "swapoff",
    "reboot",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "keyctl",
    "add_key",
    "request_key",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "open_by_handle_at",
)
CLONE_NEWUSER = 0x10000000
# The filter's descriptor in bwrap: above the ones the gate shell uses (0-3 and 9).
MIN_FD = 10


class SeccompUnavailable(RuntimeError):
    pass


@functools.cache
def program() -> bytes:
    """The compiled BPF program. Raises SeccompUnavailable without libseccomp."""
    try:
        import pyseccomp as sc
    except (ImportError, RuntimeError, OSError) as exc:  # RuntimeError: no libseccomp2
        raise SeccompUnavailable(f"libseccomp is not available: {exc}") from None
    seccomp_filter = sc.SyscallFilter(sc.ALLOW)
    eperm = sc.ERRNO(errno.EPERM)
    for name in DENIED:
        try:
            seccomp_filter.add_rule(eperm, name)
        except (ValueError, OSError):  # a call this architecture does not have
            continue
    # clone's flags are its first argument on every architecture this runs on (x86-64,
    # arm64); unshare's always are.
    for name in ("unshare", "clone"):
        seccomp_filter.add_rule(eperm, name, sc.Arg(0, sc.MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER))
    seccomp_filter.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
    with tempfile.TemporaryFile() as out:
        seccomp_filter.export_bpf(out)
        out.seek(0)
        return out.read()


def filter_fd() -> int:
    """A fresh descriptor (>= MIN_FD, close-on-exec: pass it explicitly) holding the
    program at offset 0. The caller closes it."""
    data = program()
    fd = os.memfd_create("tool-seccomp", os.MFD_CLOEXEC)
    try:
        os.write(fd, data)
        os.lseek(fd, 0, os.SEEK_SET)
        high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, MIN_FD)
    finally:
        os.close(fd)
    return high


def attach(bwrap_command: list[str]) -> tuple[list[str], int]:
    """`bwrap_command` with `--seccomp FD` added, and that FD (pass it, then close it)."""
    fd = filter_fd()
    return [bwrap_command[0], "--seccomp", str(fd), *bwrap_command[1:]], fd
