"""Host paths and the sandbox: which paths no integration may hand to a tool.

An integration's `path` field is bound read-only into the sandbox of every tool that
declares it. Binding a parent of the console's state directory would hand a tool the
encryption key, the database and every other run's artifacts, so a path that contains a
protected path, or lies inside one, is refused when it is saved and again when a run
starts (a value stored before this rule existed is then not bound)."""

from __future__ import annotations

import logging
from pathlib import Path

from django.conf import settings
from django.db import connections

logger = logging.getLogger("tools_app.integrations")


def protected_paths() -> list[tuple[str, Path]]:
    """(what it is, resolved path) of everything a tool must never read."""
    found: list[tuple[str, object]] = [
        ("the console's state directory", settings.STATE_DIR),
        ("the console's project folder", settings.BASE_DIR),
        ("DATA_PATH", settings.DATA_PATH),
        ("the encryption key file", settings.ENCRYPTION_KEY_FILE),
        ("the run artifacts folder", settings.ARTIFACTS_PATH),
        ("the runs' work folder", settings.RUNS_WORK_PATH),
    ]
    database = connections["default"].settings_dict
    if database.get("ENGINE", "").endswith("sqlite3"):
        name = str(database.get("NAME") or "")
        if name and ":memory:" not in name and not name.startswith("file:"):
            found.append(("the SQLite database", name))
    return [(what, Path(path).resolve()) for what, path in found if path]


def protected_path_problem(value: str, *, name_paths: bool = True) -> str | None:
    """Why `value` may not be bound into a sandbox, or None. Symlinks and `..` are resolved
    first, so neither hides a protected path. `name_paths=False` leaves the protected
    path out of the message (for run notices, which viewers and tools see)."""
    try:
        path = Path(value).resolve()
    except (OSError, RuntimeError, ValueError):
        return "cannot be resolved to a real path"
    protected = protected_paths()
    # The most telling reason first: "is the database" over "lies inside the state dir".
    for what, target in protected:
        if path == target:
            return f"is {what}{_named(target, name_paths)}: tools must never read it"
    for what, target in protected:
        if target.is_relative_to(path):
            return f"contains {what}{_named(target, name_paths)}: tools must never read it"
    for what, target in protected:
        if path.is_relative_to(target):
            return f"lies inside {what}{_named(target, name_paths)}: tools must never read it"
    return None


def _named(target: Path, name_paths: bool) -> str:
    return f" ({target})" if name_paths else ""


def bindable(paths: list[Path], notices: list[str], *, source: str) -> list[Path]:
    """The paths that pass protected_path_problem, resolved (what is checked is what gets
    bound); each refused one adds a notice naming `source` (and which of its paths by
    position), never a host path: run notices reach viewers and the tool. The log says
    which path it was, for the admin."""
    kept = []
    for number, path in enumerate(paths, 1):
        if problem := protected_path_problem(str(path), name_paths=False):
            which = f"{source} path {number}" if len(paths) > 1 else f"{source} path"
            notices.append(f"{which} was not made readable: it {problem}.")
            logger.warning("%s (%s) was not made readable: it %s", which, path, problem)
            continue
        kept.append(Path(path).resolve())
    return kept
