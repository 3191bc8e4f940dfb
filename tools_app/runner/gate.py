"""How a bwrap run's first process gets into its cgroups before anything of the tool runs.

A tiny shell starts with the gate pipe as its stdin and the protocol pipe as its stdout. It
waits for "go"; meanwhile the runner writes the shell's PID into the run's cgroups and sets
its rlimits from outside (prlimit). Then the shell moves the protocol pipe to fd 3, takes
the tool's stdin and stdout from the descriptors it was given, and execs bwrap, so every
process of the sandbox is counted. If the runner dies first, the gate pipe ends and the
shell exits instead of waiting forever. (Descriptors are reopened through /proc/self/fd:
dash redirects only fds 0-9.) A Python launcher would do the same from inside but costs
~40 ms of interpreter start-up. dash reads no start-up file when non-interactive, so the
environment cannot run code here.
"""

from __future__ import annotations

import contextlib
import os
import resource
import subprocess
from pathlib import Path

from .cgroups import RunCgroup

# $1: the descriptor the tool's stdin comes from, $2: the one its stdout goes to (any
# numbers, 3 included: each is reopened before fd 3 is taken; 9 is free once $1 is read).
SCRIPT = (
    'read -r go && [ "$go" = go ] || exit 125; '
    'exec <"/proc/self/fd/$1" 9>"/proc/self/fd/$2" 3>&1 1>&9 9>&- || exit 125; '
    'shift 2; exec "$@"'
)


class Gate:
    """The gate and protocol pipes of one gated start."""

    def __init__(self) -> None:
        self.gate_r, self.gate_w = os.pipe()
        self.protocol_r, self.protocol_w = os.pipe()

    def popen(
        self,
        command: list[str],
        *,
        stdin: int,
        stdout: int,
        stderr: int,
        env: dict[str, str],
        cwd: Path,
        extra_fds: tuple[int, ...] = (),
        prefix: list[str] | None = None,
    ) -> subprocess.Popen[bytes]:
        """Start the shell in front of `command`; the protocol's read end stays ours.
        `extra_fds` (numbers above 9) reach `command` as they are, e.g. a seccomp filter.
        `prefix` runs the shell itself (network.gate_prefix(): its own namespaces)."""
        shell = ["/bin/sh", "-c", SCRIPT, "tool-gate", str(stdin), str(stdout)]
        try:
            return subprocess.Popen(
                [*(prefix or []), *shell, *command],
                stdin=self.gate_r,
                stdout=self.protocol_w,
                stderr=stderr,
                pass_fds=(stdin, stdout, *extra_fds),
                env=env,
                cwd=cwd,
                start_new_session=True,
            )
        finally:  # the shell's ends are its own now
            for name in ("gate_r", "protocol_w"):
                self._close(name)

    def open(
        self, proc: subprocess.Popen[bytes], cgroup: RunCgroup | None, rlimits: dict[str, int]
    ) -> None:
        """Put the waiting shell into `cgroup`, set its rlimits, let it exec. Raises OSError
        on failure."""
        pid = proc.pid
        for procs_file in cgroup.procs_files if cgroup else []:
            try:
                with open(procs_file, "w") as handle:
                    handle.write(str(pid))
            except OSError as exc:
                raise OSError(
                    f"tool sandbox setup failed: cannot join {procs_file}: {exc}"
                ) from exc
        for name, value in rlimits.items():
            which = getattr(resource, f"RLIMIT_{name}")
            _, hard = resource.prlimit(pid, which)
            if hard != resource.RLIM_INFINITY:
                value = min(value, hard)  # only root may raise a hard limit
            resource.prlimit(pid, which, (value, value))
        try:
            os.write(self.gate_w, b"go\n")
        except BrokenPipeError:
            raise OSError("tool sandbox setup failed: the launcher did not start") from None
        finally:
            self._close("gate_w")

    def close(self) -> None:
        """After a failed start: every descriptor left, the protocol's read end included."""
        for name in ("gate_r", "gate_w", "protocol_r", "protocol_w"):
            self._close(name)

    def _close(self, name: str) -> None:
        fd = getattr(self, name)
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)
            setattr(self, name, -1)
