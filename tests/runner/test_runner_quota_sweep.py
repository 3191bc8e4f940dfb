"""The sweep of disk quotas that dead workers left mounted (tools_app/runner/quota.py):
a quota mount whose worker is gone is unmounted, so the spare or run folder under it can
be removed; a live worker's stays."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.support import require
from tools_app.runner import quota


def mount_for(owner: str, target: Path) -> None:
    target.mkdir()
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", f"{quota.SOURCE}-{owner}", str(target)],
        check=True,
    )


def owner_of(pid: int) -> str:
    return f"{pid}-{quota._start_time(pid)}"


@pytest.fixture
def mounts(tmp_path: Path):
    require(os.geteuid() != 0, "mounting a tmpfs needs root")
    made: list[Path] = []
    yield made
    for target in made:
        subprocess.run(["umount", "-l", str(target)], check=False)


def test_it_finds_the_quota_of_a_worker_that_is_a_zombie(tmp_path: Path, mounts) -> None:
    """A killed worker's pool process that nobody reaped (an init that never reaps, as in
    a container or a PID namespace) is dead though /proc still lists it: before this, its
    quota counted as alive, stayed mounted, and the spare folder under it was never
    removed (seen on a fresh Debian root entered through pivot_root)."""
    zombie = subprocess.Popen(["sleep", "0.05"])
    owner = owner_of(zombie.pid)
    for _ in range(500):  # exited, and left unreaped: the state is Z
        if Path(f"/proc/{zombie.pid}/stat").read_text().rpartition(")")[2].split()[0] == "Z":
            break
        time.sleep(0.01)
    dead, alive = tmp_path / "dead", tmp_path / "alive"
    mounts.extend([dead, alive])
    mount_for(owner, dead)
    mount_for(quota._owner(), alive)
    try:
        stale = quota.stale_mounts()
        assert str(dead) in stale
        assert str(alive) not in stale
    finally:
        zombie.wait()


def test_it_finds_the_quota_of_a_worker_that_is_gone(tmp_path: Path, mounts) -> None:
    gone = subprocess.Popen(["sleep", "0.05"])
    owner = owner_of(gone.pid)
    gone.wait()
    target = tmp_path / "gone"
    mounts.append(target)
    mount_for(owner, target)
    assert str(target) in quota.stale_mounts()
