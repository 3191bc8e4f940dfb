"""Run a test as an unprivileged user when the suite runs as root.

A root worker refuses the process fallback (no bubblewrap: the tool would run as root), so
the tests of that fallback run where it is allowed: the same test, in a child pytest as
uid/gid 65534, with its own state dir and SQLite test database."""

from __future__ import annotations

import functools
import os
import re
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support import REPO

NOBODY = 65534
CHILD_FLAG = "TOOL_CONSOLE_TEST_UNPRIVILEGED"


def _current_node_id() -> str:
    current = os.environ["PYTEST_CURRENT_TEST"]  # "tests/x.py::test_y[p] (call)"
    return current.rsplit(" ", 1)[0]


def _run_as_nobody(node_id: str) -> None:
    with tempfile.TemporaryDirectory(prefix="tool-console-unprivileged-") as scratch:
        os.chown(scratch, NOBODY, NOBODY)
        env = {
            name: value
            for name, value in os.environ.items()
            if name not in ("DATABASE_URL", "PYTEST_CURRENT_TEST", "PYTEST_ADDOPTS")
        }
        env.update(
            {
                CHILD_FLAG: "1",
                "HOME": scratch,
                "CONSOLE_STATE_DIR": f"{scratch}/state",
                "CONSOLE_SECRET_KEY": "unprivileged-test-key-not-secret",
                # A set secret key turns the HTTPS defaults on; the test client speaks
                # plain HTTP, as in the parent.
                "CONSOLE_HTTPS": "False",
                "CONSOLE_TEST_DB_NAME": f"{scratch}/test.sqlite3",
            }
        )
        done = subprocess.run(
            [
                "setpriv",
                f"--reuid={NOBODY}",
                f"--regid={NOBODY}",
                "--clear-groups",
                "--",
                sys.executable,
                "-m",
                "pytest",
                node_id,
                "-q",
                "-p",
                "no:cacheprovider",
                f"--basetemp={scratch}/pytest",
            ],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    summary = done.stdout.strip().splitlines()[-1:] or [""]
    # Passed, and nothing skipped: a skip in the child would hide a test that never ran.
    passed = re.fullmatch(r"\d+ passed(, \d+ warnings?)? in .*", summary[0])
    assert done.returncode == 0 and passed, (
        f"{node_id} as uid {NOBODY}:\n{done.stdout[-4000:]}\n{done.stderr[-2000:]}"
    )


def delegated() -> bool:
    """Whether tests decorated with when_root run in a child here (set nothing up then)."""
    return os.geteuid() == 0 and not os.environ.get(CHILD_FLAG)


def tun_open_to_all() -> bool:
    """Whether /dev/net/tun has the mode udev gives it (0666): a rootless sandbox's network
    is slirp4netns, which opens it as the worker's user. Some VMs make it 0600."""
    try:
        return os.stat("/dev/net/tun").st_mode & 0o006 == 0o006
    except OSError:
        return False


def closed_folder(path: str) -> str | None:
    """The first folder on the way to `path` (links resolved) that other users cannot
    enter, as a Python under a 0700 home is: the child could not even start."""
    for folder in reversed(Path(os.path.realpath(path)).parents):
        if not folder.stat().st_mode & stat.S_IXOTH:
            return str(folder)
    return None


def when_root(test: Callable[..., Any]) -> Callable[..., Any]:
    """Run the decorated test in a child pytest as uid 65534 when this process is root."""

    @functools.wraps(test)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if delegated():
            from tests.support import require

            require(
                not tun_open_to_all(),
                "/dev/net/tun is not open to unprivileged users (chmod 0666 /dev/net/tun, "
                "as udev makes it; `dev.py test` does as root): a non-root worker's "
                "sandboxes need it",
            )
            closed = closed_folder(sys.executable)
            require(
                closed is not None,
                f"uid {NOBODY} cannot run this Python ({sys.executable}): {closed} is closed to "
                f"other users (as root: chmod o+x {closed}, or use a Python installed elsewhere)",
            )
            _run_as_nobody(_current_node_id())
            return None
        return test(*args, **kwargs)

    return wrapper
