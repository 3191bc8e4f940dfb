"""The root runner collects a run's artifacts without following anything the tool planted
(runner/artifacts.py): a linked or replaced output folder, links inside it, hard links,
FIFOs, device nodes and trees past the caps. Real sandboxed runs plant what a hostile
tool can; the walker is also run directly on trees planted by the test (as root), for
what a tool cannot make from inside its sandbox.

What the walker opens and lists is observed through Python's audit hooks (the "open" and
"os.scandir" events fire before the system call), which also let a test swap a folder
for a link in the middle of the walk, as a process racing the runner would."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.runner.test_runner import run_tool
from tests.support import REPO, require
from tools_app.runner import (
    Limits,
    Redactor,
    RunOutcome,
    artifacts,
    core,
    isolation_level,
    standby,
)
from tools_app.runner.records import Artifact

FAST = Limits(timeout=10, grace_seconds=1)
LINK_TARGETS = ["/etc", str(REPO), "/", "/proc/self/cwd/var"]
SECRET = b"the host's own secret"

Event = tuple[str, tuple[Any, ...]]
_watchers: list[Callable[[str, tuple[Any, ...]], None]] = []


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event in ("open", "os.scandir"):
        for watcher in list(_watchers):
            watcher(event, args)


sys.addaudithook(_audit)  # cannot be removed: it does nothing without a watcher


@contextmanager
def watching(also: Callable[[str, tuple[Any, ...]], None] | None = None) -> Iterator[list[Event]]:
    """The open and scandir events of this thread while the block runs."""
    events: list[Event] = []
    thread = threading.current_thread()

    def watcher(event: str, args: tuple[Any, ...]) -> None:
        if threading.current_thread() is thread:
            events.append((event, args))
            if also is not None:
                also(event, args)

    _watchers.append(watcher)
    try:
        yield events
    finally:
        _watchers.remove(watcher)


def opened(events: list[Event], name: str) -> bool:
    return any(e == "open" and str(args[0]).endswith(name) for e, args in events)


def listings(events: list[Event], under: Path) -> int:
    """Folders listed: by descriptor (the walker), or by a path under `under`."""
    return sum(
        1
        for event, args in events
        if event == "os.scandir"
        and (isinstance(args[0], int) or str(args[0]).startswith(str(under)))
    )


def sandboxed() -> None:
    require(isolation_level()[0] != "bwrap", "these runs need bubblewrap")


def root() -> None:
    require(os.geteuid() != 0, "planting device nodes and mounts needs root")


def contents(outcome: RunOutcome | list[Artifact]) -> list[bytes]:
    found = outcome.artifacts if isinstance(outcome, RunOutcome) else outcome
    return [artifact.path.read_bytes() for artifact in found]


def no_host_path(notices: list[str], *paths: object) -> None:
    for notice in notices:
        for path in ("/etc", str(REPO), *map(str, paths)):
            assert path not in notice, notice


# -- real sandboxed runs --------------------------------------------------------------------


@pytest.mark.parametrize("target", LINK_TARGETS)
def test_it_collects_nothing_from_an_output_folder_replaced_by_a_link(
    tmp_path: Path, target: str
) -> None:
    sandboxed()
    with watching() as events:
        outcome = run_tool(
            tmp_path,
            "bash",
            f'rm -rf "$TOOL_OUTPUT_DIR" && ln -s {target} "$TOOL_OUTPUT_DIR" && echo linked',
            limits=FAST,
        )
    assert outcome.result["content"][0]["text"].strip() == "linked", outcome
    assert outcome.artifacts == []
    assert "no artifacts: the tool replaced its output folder by a link" in outcome.notices
    assert listings(events, tmp_path) == 0  # nothing behind the link was even listed
    no_host_path(outcome.notices, tmp_path, target)


def test_it_collects_nothing_from_an_output_folder_replaced_by_a_file(tmp_path: Path) -> None:
    sandboxed()
    outcome = run_tool(
        tmp_path,
        "bash",
        'rm -rf "$TOOL_OUTPUT_DIR" && echo data > "$TOOL_OUTPUT_DIR" && echo done',
        limits=FAST,
    )
    assert outcome.artifacts == []
    assert (
        "no artifacts: the tool replaced its output folder by something that is not a folder"
        in outcome.notices
    )


def test_it_follows_no_link_inside_the_output_folder(tmp_path: Path) -> None:
    sandboxed()
    outcome = run_tool(
        tmp_path,
        "bash",
        f"""
        out="$TOOL_OUTPUT_DIR"
        mkdir "$out/sub" && echo kept > "$out/sub/kept.txt"
        ln -s /etc "$out/sub/conf"
        ln -s {REPO} "$out/project"
        ln -s / "$out/root"
        ln -s /etc/passwd "$out/passwd"
        ln -s /proc/self/cwd/var "$out/sub/var"
        echo done
        """,
        limits=FAST,
    )
    assert [(a.name, a.path.read_bytes()) for a in outcome.artifacts] == [
        ("sub/kept.txt", b"kept\n")
    ]
    for name in ("passwd", "project", "root", "sub/conf", "sub/var"):
        assert f"artifact {name!r} skipped: a link, not followed" in outcome.notices
    no_host_path(outcome.notices, tmp_path)


def test_it_refuses_a_hard_link(tmp_path: Path) -> None:
    """The strongest case a sandboxed tool has: it can hard-link only files on its own
    file system (the quota tmpfs), i.e. its own files, and refused (EXDEV) elsewhere."""
    sandboxed()
    outcome = run_tool(
        tmp_path,
        "bash",
        """
        echo outside > "$HOME/outside.txt"
        ln "$HOME/outside.txt" "$TOOL_OUTPUT_DIR/linked.txt"
        ln /tool/index.sh "$TOOL_OUTPUT_DIR/tool.sh" 2>/dev/null || echo "no cross-device link"
        echo plain > "$TOOL_OUTPUT_DIR/plain.txt"
        """,
        limits=FAST,
    )
    assert "no cross-device link" in outcome.result["content"][0]["text"]
    assert [a.name for a in outcome.artifacts] == ["plain.txt"]
    assert "artifact 'linked.txt' skipped: it has other hard links" in outcome.notices


def test_it_never_opens_a_fifo(tmp_path: Path) -> None:
    sandboxed()
    with watching() as events:
        outcome = run_tool(
            tmp_path,
            "bash",
            'mkfifo "$TOOL_OUTPUT_DIR/pipe" && echo x > "$TOOL_OUTPUT_DIR/after.txt"',
            limits=FAST,
        )
    assert [a.name for a in outcome.artifacts] == ["after.txt"]
    assert "artifact 'pipe' skipped: not a regular file" in outcome.notices
    assert not opened(events, "pipe")


def test_it_stops_walking_at_the_file_cap(tmp_path: Path) -> None:
    sandboxed()
    with watching() as events:
        outcome = run_tool(
            tmp_path,
            "bash",
            f"""
            cd "$TOOL_OUTPUT_DIR" && mkdir a && cd a
            for n in $(seq -w 0 {artifacts.MAX_FILES}); do : > "f$n"; done
            cd .. && for n in $(seq -w 0 19); do mkdir -p "b$n/c" && : > "b$n/c/f"; done
            echo made
            """,
            limits=FAST,
        )
    assert len(outcome.artifacts) == artifacts.MAX_FILES
    assert f"more than {artifacts.MAX_FILES} artifacts; the rest were skipped" in outcome.notices
    # The output folder and a/: the 40 folders after the cap were never listed.
    assert listings(events, tmp_path) == 2


def test_it_collects_nothing_through_a_link_from_a_spare_sandbox(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sandboxed()
    monkeypatch.setenv("TOOL_CONSOLE_SPARE_SANDBOXES", "on")
    hostile = """
        import os, shutil

        def execute(tool_call_id, params, signal, on_update):
            out = os.environ["TOOL_OUTPUT_DIR"]
            shutil.rmtree(out)
            os.symlink("/etc", out)
            return {"content": [{"type": "text", "text": "linked"}]}
        """
    try:
        first = run_tool(tmp_path, "python", hostile, limits=FAST)
        second = run_tool(tmp_path, "python", hostile, limits=FAST)
    finally:
        standby.discard_spare()
    assert second.spare, "the second run should have used a spare sandbox"
    for outcome in (first, second):
        assert outcome.artifacts == []
        assert "no artifacts: the tool replaced its output folder by a link" in outcome.notices


# -- the walker on trees planted by the test ------------------------------------------------


def output_of(tmp_path: Path) -> tuple[Path, Path]:
    """(base, output folder) laid out as quota.py does: base/home/output."""
    base = tmp_path / "disk"
    out = base / "home" / "output"
    out.mkdir(parents=True)
    return base, out


def collect(
    tmp_path: Path, base: Path, also: Callable[[str, tuple[Any, ...]], None] | None = None
) -> tuple[list[Artifact], list[str], list[Event]]:
    """artifacts.collect() on a thread of its own, so a walk that blocks fails instead of
    hanging the suite: (artifacts, notices, what it opened and listed)."""
    notices: list[str] = []
    done: list[tuple[list[Artifact], list[Event]]] = []

    def walk() -> None:
        with watching(also) as events:
            found = artifacts.collect(base, tmp_path / "artifacts", Limits(), Redactor({}), notices)
        done.append((found, events))

    worker = threading.Thread(target=walk, daemon=True)
    worker.start()
    worker.join(60)
    assert done, "collecting the artifacts blocked"
    return done[0][0], notices, done[0][1]


@pytest.mark.parametrize("target", LINK_TARGETS)
def test_it_walks_nothing_behind_a_linked_top(tmp_path: Path, target: str) -> None:
    base, out = output_of(tmp_path)
    out.rmdir()
    out.symlink_to(target)
    found, notices, events = collect(tmp_path, base)
    assert found == []
    assert notices == ["no artifacts: the tool replaced its output folder by a link"]
    assert not [e for e in events if e[0] == "os.scandir"]


def test_it_refuses_a_hard_link_to_a_file_outside(tmp_path: Path) -> None:
    base, out = output_of(tmp_path)
    secret = tmp_path / "secret.key"
    secret.write_bytes(SECRET)
    os.link(secret, out / "key")
    (out / "own.txt").write_bytes(b"own")
    found, notices, _ = collect(tmp_path, base)
    assert contents(found) == [b"own"]
    assert notices == ["artifact 'key' skipped: it has other hard links"]


def test_it_never_opens_a_fifo_or_a_device_node(tmp_path: Path) -> None:
    root()
    base, out = output_of(tmp_path)
    os.mkfifo(out / "pipe")
    os.mknod(out / "zero", 0o600 | stat.S_IFCHR, os.makedev(1, 5))  # /dev/zero: endless
    os.mknod(out / "block", 0o600 | stat.S_IFBLK, os.makedev(7, 0))  # loop0
    found, notices, events = collect(tmp_path, base)
    assert found == []
    for name in ("block", "pipe", "zero"):
        assert f"artifact {name!r} skipped: not a regular file" in notices
        assert not opened(events, name)


def test_it_never_follows_a_folder_swapped_for_a_link_while_it_walks(tmp_path: Path) -> None:
    """A process racing the runner replaces sub/ by a link the moment the walk reaches it
    (the audit event fires just before the system call that lists or opens it)."""
    base, out = output_of(tmp_path)
    (out / "sub").mkdir()
    (out / "sub" / "key").write_bytes(b"decoy")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "key").write_bytes(SECRET)
    swapped = []

    def swap(event: str, args: tuple[Any, ...]) -> None:
        if not swapped and str(args[0]).endswith("sub"):
            swapped.append(True)
            os.rename(out / "sub", tmp_path / "moved")
            (out / "sub").symlink_to(elsewhere)

    found, notices, _ = collect(tmp_path, base, also=swap)
    assert swapped
    assert SECRET not in contents(found)
    assert notices == ["artifact 'sub' skipped: could not be opened as a folder"]


def test_it_refuses_what_is_on_another_file_system(tmp_path: Path) -> None:
    root()
    base, out = output_of(tmp_path)
    (out / "mnt").mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "none", str(out / "mnt")], check=True)
    try:
        (out / "mnt" / "inside.txt").write_bytes(b"other fs")
        found, notices, _ = collect(tmp_path, base)
        assert found == []
        assert notices == ["artifact 'mnt' skipped: on another file system"]
        subprocess.run(["umount", str(out / "mnt")], check=True)
        subprocess.run(["mount", "-t", "tmpfs", "none", str(out)], check=True)
        (out / "inside.txt").write_bytes(b"other fs")
        found, notices, _ = collect(tmp_path, base)
        assert found == []
        assert notices == ["no artifacts: the output folder is on another file system"]
    finally:
        subprocess.run(["umount", "-R", "-l", str(out)], check=False, capture_output=True)
        subprocess.run(["umount", "-l", str(out / "mnt")], check=False, capture_output=True)


def test_it_stops_at_the_entry_cap_while_listing(tmp_path: Path) -> None:
    base, out = output_of(tmp_path)
    for n in range(artifacts.MAX_ENTRIES + 50):
        (out / f"d{n:05d}").mkdir()
    found, notices, events = collect(tmp_path, base)
    assert found == []
    assert notices == [
        f"the output folder holds more than {artifacts.MAX_ENTRIES} entries; "
        "the rest were not looked at"
    ]
    assert listings(events, tmp_path) == 1  # the top only: no folder of it was listed


def test_it_stops_at_the_file_cap_while_walking(tmp_path: Path) -> None:
    base, out = output_of(tmp_path)
    (out / "a").mkdir()
    for n in range(artifacts.MAX_FILES + 1):
        (out / "a" / f"f{n:04d}").write_bytes(b"")
    for n in range(20):
        (out / f"b{n:02d}").mkdir()
        (out / f"b{n:02d}" / "f").write_bytes(b"")
    found, notices, events = collect(tmp_path, base)
    assert len(found) == artifacts.MAX_FILES
    assert notices == [f"more than {artifacts.MAX_FILES} artifacts; the rest were skipped"]
    assert listings(events, tmp_path) == 2


def test_it_stops_at_the_depth_cap(tmp_path: Path) -> None:
    base, out = output_of(tmp_path)
    deep = out.joinpath(*[f"d{n}" for n in range(artifacts.MAX_DEPTH + 5)])
    deep.mkdir(parents=True)
    (deep / "bottom.txt").write_bytes(b"deep")
    (out / "top.txt").write_bytes(b"top")
    found, notices, _ = collect(tmp_path, base)
    assert contents(found) == [b"top"]
    name = "/".join(f"d{n}" for n in range(artifacts.MAX_DEPTH + 1))
    assert notices == [
        f"artifact {name!r} skipped: nested deeper than {artifacts.MAX_DEPTH} folders"
    ]


def test_it_collects_a_plain_tree_in_walk_order(tmp_path: Path) -> None:
    base, out = output_of(tmp_path)
    (out / "b").mkdir()
    (out / "b" / "two.txt").write_bytes(b"2")
    (out / "a.txt").write_bytes(b"1")
    (out / "c.txt").write_bytes(b"3")
    found, notices, _ = collect(tmp_path, base)
    assert [(a.name, a.path.read_bytes()) for a in found] == [
        ("a.txt", b"1"),
        ("c.txt", b"3"),
        ("b/two.txt", b"2"),
    ]
    assert notices == []


# -- teardown of a work dir with planted links -------------------------------------------------


def test_it_removes_a_work_dir_without_touching_what_its_links_point_to(tmp_path: Path) -> None:
    """A tool's work dir is left on the host's disk when the worker has no quota tmpfs;
    the root worker removes it, links to folders elsewhere included."""
    victim = tmp_path / "victim"
    (victim / "keep").mkdir(parents=True)
    victim.chmod(0o555)
    work = tmp_path / "run" / "disk"
    (work / "home" / "ro" / "inner").mkdir(parents=True)
    (work / "home" / "link").symlink_to(victim)
    (work / "home" / "ro" / "deeper").symlink_to(victim / "keep")
    (work / "home" / "ro").chmod(0o500)

    core._remove_tree(tmp_path / "run")

    assert not (tmp_path / "run").exists()
    assert stat.S_IMODE(victim.stat().st_mode) == 0o555
    assert [p.name for p in victim.iterdir()] == ["keep"]


def test_it_counts_skipped_entries_past_a_few_notices(tmp_path: Path) -> None:
    """A tool cannot fill a run's notices with thousands of planted links."""
    base, out = output_of(tmp_path)
    extra = 10
    for n in range(artifacts.MAX_SKIP_NOTICES + extra):
        (out / f"link{n:03d}").symlink_to("/etc/passwd")
    found, notices, _ = collect(tmp_path, base)
    assert found == []
    assert len(notices) == artifacts.MAX_SKIP_NOTICES + 1
    assert notices[0] == "artifact 'link000' skipped: a link, not followed"
    assert notices[-1] == f"{extra} more artifacts skipped (links, special files or over a limit)"


def test_it_never_reads_a_file_swapped_for_a_fifo_while_it_walks(tmp_path: Path) -> None:
    """Swapped between the listing and the open: the first open is O_PATH (it opens
    nothing), and what it found is not a regular file, so nothing is opened for reading."""
    base, out = output_of(tmp_path)
    (out / "data").write_bytes(b"data")
    first_open: list[int] = []
    after: list[Event] = []

    def swap(event: str, args: tuple[Any, ...]) -> None:
        if first_open:
            after.append((event, args))
        elif event == "open" and args[0] == "data":
            first_open.append(args[2])
            (out / "data").unlink()
            os.mkfifo(out / "data")

    found, notices, _ = collect(tmp_path, base, also=swap)
    assert found == []
    assert notices == ["artifact 'data' skipped: not a regular file"]
    assert first_open[0] & os.O_PATH
    assert not [e for e in after if e[0] == "open"]
