"""How a bwrap run's first process gets into its cgroups before anything of the tool runs.

A tiny shell opens the protocol FIFO as its fd 3 and waits at the gate FIFO; the runner
writes the shell's PID into the run's cgroups, sets its rlimits from outside (prlimit) and
opens the gate; the shell then execs bwrap, so every process of the sandbox is counted. A
Python launcher would do the same from inside but costs ~40 ms of interpreter start-up.
dash reads no start-up file when non-interactive, so the environment cannot run code here.
"""

from __future__ import annotations

import errno
import os
import resource
import subprocess
import time
from pathlib import Path

from .cgroups import RunCgroup

SCRIPT = (
    'exec 3>"$2" || exit 125; read -r go <"$1" && [ "$go" = go ] || exit 125; shift 2; exec "$@"'
)
SECONDS = 10.0  # how long the shell may take to reach the gate


class Gate:
    """The two FIFOs of one gated start, made in `folder` (removed once both are open)."""

    def __init__(self, folder: Path) -> None:
        self.gate = folder / "gate"
        self.protocol = folder / "protocol"
        os.mkfifo(self.gate, 0o600)
        os.mkfifo(self.protocol, 0o600)
        # Opened before the shell starts, so its `exec 3>` does not block.
        self.protocol_r = os.open(self.protocol, os.O_RDONLY | os.O_NONBLOCK)

    def argv(self, command: list[str]) -> list[str]:
        return ["/bin/sh", "-c", SCRIPT, "tool-gate", str(self.gate), str(self.protocol), *command]

    def open(
        self, proc: subprocess.Popen[bytes], cgroup: RunCgroup | None, rlimits: dict[str, int]
    ) -> None:
        """Put the waiting shell into `cgroup`, set its rlimits, let it exec. Raises OSError
        on failure. The shell has opened the protocol FIFO as its fd 3 by the time it opens
        the gate, so the runner sees no false end of stream."""
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
        deadline = time.monotonic() + SECONDS
        while True:
            try:
                fd = os.open(self.gate, os.O_WRONLY | os.O_NONBLOCK)
                break
            except OSError as exc:
                if exc.errno != errno.ENXIO:  # ENXIO: the shell has not opened it yet
                    raise
            if proc.poll() is not None or time.monotonic() > deadline:
                raise OSError("tool sandbox setup failed: the launcher did not start")
            time.sleep(0.0005)
        try:
            os.write(fd, b"go\n")
        finally:
            os.close(fd)
        for fifo in (self.gate, self.protocol):  # both are open now; leave no trace
            fifo.unlink()

    def close(self) -> None:
        """After a failed start: the read end and any FIFO left."""
        os.close(self.protocol_r)
        for fifo in (self.gate, self.protocol):
            fifo.unlink(missing_ok=True)
