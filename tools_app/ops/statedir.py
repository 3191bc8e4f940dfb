"""The state directory is private: its database files are the console's alone.

console/settings.py creates STATE_DIR and its folders 0700 and an empty SQLite database
0600 before SQLite opens it. This module covers SQLite files made elsewhere (a test
database, an install from before that rule) the moment a connection to them opens."""

from __future__ import annotations

import contextlib
import os

PRIVATE_FILE = 0o600


def private_sqlite_files(sender, connection, **kwargs) -> None:
    """connection_created receiver: make a SQLite database and its -wal/-shm files 0600."""
    if connection.vendor != "sqlite":
        return
    name = str(connection.settings_dict.get("NAME") or "")
    if not name or name == ":memory:" or name.startswith("file:"):
        return
    for path in (name, f"{name}-wal", f"{name}-shm", f"{name}-journal"):
        with contextlib.suppress(FileNotFoundError, PermissionError):
            if os.stat(path).st_mode & 0o777 != PRIVATE_FILE:
                os.chmod(path, PRIVATE_FILE)
