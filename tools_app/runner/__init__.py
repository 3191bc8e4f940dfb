"""The sandboxed tool runner: every tool execution goes through `run()`.

Pure Python, no Django: a Django-side wrapper turns a tool version, its integrations and
the settings into a `RunRequest` and stores the `RunOutcome`.

How each limit is enforced (the limits themselves: docs/runs.md, "Limits"):

- Isolation: bubblewrap where `isolation_level()` finds it working (see sandbox.py for the
  file system a tool sees); else a plain subprocess in its own session with a cleared
  environment and rlimits, which does NOT hide the host's files (the tool runs as the
  console's user) and enforces `network: false` only where the launcher can unshare the
  network namespace (root).
- Wall time and cancellation: SIGTERM to every process of the run (the abort signal in
  TS/JS, `signal.aborted` in python, bash's own SIGTERM), SIGKILL to all after
  `grace_seconds`. In bwrap, killing bwrap tears down the whole PID namespace.
- Memory: a per-run memory cgroup where one can be made (cgroups.py), plus RLIMIT_AS for
  python and bash. Node cannot run under RLIMIT_AS (V8 reserves GiBs of address space), so
  node gets `--max-old-space-size` (3/4 of the limit: a clean "heap out of memory"),
  RLIMIT_DATA of the limit + 768 MiB as a backstop, and, without a memory cgroup, the
  runner's watchdog that sums the run's RSS every 0.1 s and kills it over the limit.
- Processes: RLIMIT_NPROC is per user and ignored for root, so a pids cgroup
  (max_processes + 32 for runtime threads) or, without one, the watchdog that counts the
  run's processes; either way a run that hits the limit is killed as a whole.
- Start-up: under bwrap, node and python tools start from a standby sandbox (standby.py):
  the harness is started, in its cgroups, before the run is handed to it; after a run, a
  spare of the same shape is started in the background for the next one.
- Privilege (privilege.py): a root worker runs tool code as CONSOLE_RUNNER_UID/GID (65534),
  switched by setpriv inside bwrap, and refuses to run tools without bwrap. /proc/sys is
  read-only; a seccomp filter (seccomp.py) denies mounts, modules, BPF, ptrace, keyrings,
  new user namespaces and the like.
- Disk (quota.py): everything a run can write is one tmpfs of CONSOLE_RUNNER_DISK_MB,
  mounted on the host by a root worker, or by a non-root worker's run inside its own user
  and mount namespace (sandbox.rootless()); RLIMIT_FSIZE caps each file at it in any case.
- Network: `network: false` gets an empty network namespace; `network: true` under bwrap
  gets its own namespace whose only way out is slirp4netns behind nftables rules of the
  egress policy (network.py, tools_app/egress/policy.py), set up before any tool code runs, by
  a root worker or, in the run's own user namespace, by a non-root one. IPv6 is not routed.
- Teardown: a run is final once every process of it is dead (the kernel ends a bwrap
  PID namespace with its first process; the runner kills what its cgroup or the process
  table still shows); its cgroup, quota mount, network and work dir are freed afterwards
  on one background thread (teardown.py), which drain() waits for (at exit, at a pool
  process's shutdown, in tests).
- Output: pipes are read incrementally into bounded buffers (streams.py); the harness clips
  results and updates before sending, the runner redacts and clips again.
"""

from __future__ import annotations

from .core import run
from .limits import Limits
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
from .sandbox import isolation_level, node_executable

__all__ = [
    "CANCELLED",
    "FAILED",
    "SUCCEEDED",
    "TIMED_OUT",
    "Artifact",
    "Limits",
    "RunOutcome",
    "RunRequest",
    "Redactor",
    "isolation_level",
    "node_executable",
    "run",
]
