"""The first process of every run: joins the run's cgroups, sets its rlimits, moves the
protocol pipe to fd 3, then execs bwrap or the tool's interpreter.

It exists so all of this happens before anything of the tool runs, without `preexec_fn`
(unsafe in the console's threaded processes). Started as
`python -I -S launch.py CONFIG_JSON ARGV...`; standalone, stdlib only. Exit 125 means the
sandbox could not be set up.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sys

PROTOCOL_FD = 3
CLONE_NEWNET = 0x40000000
PR_SET_PDEATHSIG = 1


def _fail(message: str) -> None:
    sys.stderr.write(f"tool sandbox setup failed: {message}\n")
    sys.stderr.flush()
    os._exit(125)


def _libc() -> object:
    import ctypes  # only when needed: it costs start-up time

    return ctypes.CDLL(None, use_errno=True)


def _unshare_network() -> None:
    import ctypes

    if _libc().unshare(CLONE_NEWNET) != 0:  # type: ignore[attr-defined]
        _fail(f"no network namespace: {os.strerror(ctypes.get_errno())}")


def _die_with_parent(parent: int) -> None:
    """Without bwrap's --die-with-parent: SIGKILL this process when the runner dies."""
    _libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # type: ignore[attr-defined]
    if os.getppid() != parent:  # the runner died before prctl
        os._exit(125)


def main() -> None:
    config = json.loads(sys.argv[1])
    argv = sys.argv[2:]
    for procs_file in config.get("cgroups", []):
        try:
            with open(procs_file, "w") as handle:
                handle.write(str(os.getpid()))
        except OSError as exc:
            _fail(f"cannot join {procs_file}: {exc}")
    for name, value in config.get("rlimits", {}).items():
        which = getattr(resource, f"RLIMIT_{name}")
        _, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)  # only root may raise a hard limit
        resource.setrlimit(which, (value, value))
    if config.get("unshare_net"):
        _unshare_network()
    if config.get("die_with_parent"):
        _die_with_parent(config["die_with_parent"])
    protocol_fd = config.get("protocol_fd")
    if protocol_fd is not None and protocol_fd != PROTOCOL_FD:
        os.dup2(protocol_fd, PROTOCOL_FD)
        os.close(protocol_fd)
    try:
        os.execv(argv[0], argv)  # noqa: S606 - argv from the runner, no shell
    except OSError as exc:
        _fail(f"cannot run {argv[0]}: {exc}")


if __name__ == "__main__":
    main()
