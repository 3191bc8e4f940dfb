"""The seccomp filter every bwrap sandbox runs under (bwrap --seccomp FD).

Default allow; the system calls below fail with EPERM: they reach kernel surfaces a tool
never needs (mounts, modules, kexec, BPF, perf, userfaultfd, keyrings, other processes'
memory, file handles) and are where sandbox escapes usually start. New user namespaces are
refused too (unshare and clone with CLONE_NEWUSER): inside one, an unprivileged process
gains every capability over that namespace's objects. clone3 passes its flags in memory,
which seccomp cannot inspect, so it fails with ENOSYS and libc falls back to clone (what
Docker and Flatpak do). io_uring (setup, enter, register) fails with EPERM: it reaches
much of the kernel past the checks seccomp makes on ordinary calls, and has been a frequent
privilege-escalation surface; Node's libuv and Python fall back to ordinary calls without it.

socket() and socketpair() work for AF_UNIX, AF_INET and AF_INET6 only, plus AF_NETLINK's
NETLINK_ROUTE: glibc's getaddrinfo (AI_ADDRCONFIG, what Node's net.connect asks for) and
getifaddrs/if_nameindex (Node's os.networkInterfaces) read the interfaces through it, in
the run's own network namespace; changing them needs CAP_NET_ADMIN, which the tool lacks.
Every other family, and every other netlink protocol (netfilter, uevents, audit...), fails
with EAFNOSUPPORT: AF_VSOCK, for one, reaches the host past the network namespace. The
family is compared as the whole 64-bit register, so a value with high bits set (which the
kernel would truncate to an allowed int) is refused too.

Other architectures' system call ABIs (int 0x80 on x86-64, and x32's numbers, which carry
bit 30) kill the process: libseccomp's default for a filter of the native architecture
only, checked in the program's first instructions.

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
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
)
CLONE_NEWUSER = 0x10000000
AF_UNIX, AF_INET, AF_INET6, AF_NETLINK = 1, 2, 10, 16
NETLINK_ROUTE = 0
ALLOWED_FAMILIES = (AF_UNIX, AF_INET, AF_INET6, AF_NETLINK)
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
    _add_family_rules(sc, seccomp_filter)
    with tempfile.TemporaryFile() as out:
        seccomp_filter.export_bpf(out)
        out.seek(0)
        return out.read()


def _add_family_rules(sc, seccomp_filter) -> None:
    """socket()/socketpair() refuse every family but ALLOWED_FAMILIES (an allow-list under
    a default-allow filter: each gap below the highest allowed family, and everything
    above it), and AF_NETLINK with any protocol but NETLINK_ROUTE."""
    refuse = sc.ERRNO(errno.EAFNOSUPPORT)
    highest = max(ALLOWED_FAMILIES)
    for name in ("socket", "socketpair"):
        # Unsigned 64-bit comparisons: negative or high-bit values are above `highest`.
        seccomp_filter.add_rule(refuse, name, sc.Arg(0, sc.GT, highest))
        for family in range(highest):
            if family not in ALLOWED_FAMILIES:
                seccomp_filter.add_rule(refuse, name, sc.Arg(0, sc.EQ, family))
        seccomp_filter.add_rule(
            refuse, name, sc.Arg(0, sc.EQ, AF_NETLINK), sc.Arg(2, sc.NE, NETLINK_ROUTE)
        )


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
