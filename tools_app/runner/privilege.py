"""Tool code never runs as the host's root user (docs/runs.md, "Trust boundary").

When the worker is root, bubblewrap still starts as root: it must read every bind source
(the tool folder, the harness inside the project, node and the venv, the run's work dir),
and those may sit under 0700 directories such as /root or the state dir. Its capabilities
are cut to the three that `setpriv` needs (CAP_SETUID, CAP_SETGID, CAP_SETPCAP); inside the
sandbox, under the seccomp filter, the first command is `setpriv`, which switches real,
effective and saved ids to CONSOLE_RUNNER_UID/CONSOLE_RUNNER_GID (default 65534), clears the
supplementary groups, the inheritable, ambient and bounding capability sets and sets
no_new_privs, then execs the interpreter. So nothing of the tool ever runs with uid 0 or a
capability; bwrap's own helper processes (uid 0, no tool code) are all that stay root.

The runner (root, outside) keeps doing what needs root: the cgroup join and rlimits at the
gate, mounting the run's disk quota, reading artifacts. A root worker without working
bubblewrap refuses to run tools instead of running them as root.

Run by an unprivileged user, nothing here changes anything: bwrap then maps the worker's
own uid into its user namespace.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

DEFAULT_ID = 65534  # nobody / nogroup
SETPRIV = "/usr/bin/setpriv"  # util-linux; bound into the sandbox with /usr
# What bwrap keeps for setpriv: switch ids (SETUID, SETGID) and empty the bounding set
# (SETPCAP). setpriv drops all three before it execs the tool.
BWRAP_CAPS = ("CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP")


def worker_is_root() -> bool:
    return os.geteuid() == 0


def _id(name: str) -> int:
    raw = os.environ.get(name, "").strip()
    return int(raw) if raw else DEFAULT_ID


def run_ids() -> tuple[int, int]:
    """(uid, gid) that tool code runs as when the worker is root. Raises ValueError."""
    return _id("CONSOLE_RUNNER_UID"), _id("CONSOLE_RUNNER_GID")


def problem() -> str | None:
    """Why a root worker cannot drop privileges for tools here, or None (also when the
    worker is not root)."""
    if not worker_is_root():
        return None
    try:
        uid, gid = run_ids()
    except ValueError:
        return "CONSOLE_RUNNER_UID and CONSOLE_RUNNER_GID must be numbers"
    if uid <= 0 or gid <= 0:
        return (
            f"CONSOLE_RUNNER_UID/CONSOLE_RUNNER_GID ({uid}/{gid}) must name an unprivileged "
            "user and group, not root"
        )
    if not os.access(SETPRIV, os.X_OK):
        return f"{SETPRIV} (util-linux) is missing, so tools cannot drop root"
    return None


def refusal(isolation: str, reason: str) -> str | None:
    """The run result when a run must not start for privilege reasons, else None."""
    if not worker_is_root():
        return None
    if isolation != "bwrap":
        return (
            "Refused: the worker runs as root and bubblewrap is not available "
            f"({reason}), so the tool would run as the host's root user. Install bubblewrap "
            "(Debian package bubblewrap) or run the worker as an unprivileged user."
        )
    if why := problem():
        return f"Refused: the worker runs as root and {why}."
    return None


def bwrap_cap_args() -> list[str]:
    if not worker_is_root():
        return []
    args = ["--cap-drop", "ALL"]
    for cap in BWRAP_CAPS:
        args += ["--cap-add", cap]
    return args


def drop_argv() -> list[str]:
    """The command in front of the tool's interpreter inside bwrap (empty unless root)."""
    if not worker_is_root():
        return []
    uid, gid = run_ids()
    return [
        SETPRIV,
        f"--reuid={uid}",
        f"--regid={gid}",
        "--clear-groups",
        "--no-new-privs",
        "--inh-caps=-all",
        "--ambient-caps=-all",
        "--bounding-set=-all",
        "--",
    ]


# bwrap options that make something at a path in the sandbox: (option, index of the
# destination among its arguments, number of arguments).
_MOUNT_OPTIONS = {
    "--bind": (1, 2),
    "--ro-bind": (1, 2),
    "--bind-try": (1, 2),
    "--ro-bind-try": (1, 2),
    "--dev-bind": (1, 2),
    "--symlink": (1, 2),
    "--tmpfs": (0, 1),
    "--proc": (0, 1),
    "--dev": (0, 1),
    "--dir": (0, 1),
    "--mqueue": (0, 1),
}


def open_parents(args: list[str]) -> list[str]:
    """bwrap `args` with the missing parent directories of every mount made first, with
    mode 0755.

    bwrap run by root creates missing parents (/etc for /etc/ssl, /home for /home/tool,
    the venv's path for node) with mode 0700 and uid 0, which the run uid could not
    traverse. Unchanged when the worker is not root (they are its own then).

    Plain string work: this runs for every sandbox start (twice per run with spares), and
    PurePosixPath objects for a few hundred arguments cost ~10 ms."""
    if not worker_is_root():
        return args
    out: list[str] = []
    made: set[str] = set()  # directories that exist in the sandbox by now
    index = 0
    while index < len(args):
        arg = args[index]
        if arg not in _MOUNT_OPTIONS:
            out.append(arg)
            index += 1
            continue
        offset, count = _MOUNT_OPTIONS[arg]
        target = _normal(args[index + 1 + offset])
        parts = target.split("/")[1:-1] if target.startswith("/") else []
        parent = ""
        for part in parts:
            parent += "/" + part
            if parent not in made:
                out += ["--perms", "0755", "--dir", parent]
                made.add(parent)
        # A mount hides what was made below its target (e.g. /tmp bound over).
        below = target.rstrip("/") + "/"
        if any(path.startswith(below) for path in made):
            made = {path for path in made if not path.startswith(below)}
        made.add(target)
        out += args[index : index + 1 + count]
        index += 1 + count
    return out


def _normal(path: str) -> str:
    """`path` as PurePosixPath spells it (no doubled slashes, no "." parts, no trailing
    slash); ".." stays, as bwrap would see it."""
    if "//" not in path and "/." not in path and not path.endswith("/"):
        return path
    return str(PurePosixPath(path))


def give(path: Path, mode: int) -> None:
    """Make a directory the run's: owned by the run uid when the worker is root."""
    if worker_is_root():
        uid, gid = run_ids()
        os.chown(path, uid, gid, follow_symlinks=False)
    os.chmod(path, mode, follow_symlinks=False)


def make_dirs(base: Path, relative: Path) -> None:
    """mkdir -p base/relative, each new directory the run's (e.g. for an output_path)."""
    path = base
    for part in relative.parts:
        path = path / part
        if not path.is_dir():
            path.mkdir()
            give(path, 0o755)
