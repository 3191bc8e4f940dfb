"""What collecting a run's artifacts costs, the old walk (os.walk from a path, which
followed a linked output folder) against the descriptor walk of runner/artifacts.py, side
by side in one process over the same trees: an empty output folder (most runs), 1 file,
100 files, and a nested tree (3 levels of 4 folders, 2 files in each). Each call copies
into a fresh folder, as a run does. Prints µs per call (best of 7 batches) and the
difference; the issue's budget is 1 ms a warm run.

    python bench/artifacts_walk.py
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path, PurePosixPath

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tools_app.runner import artifacts  # noqa: E402
from tools_app.runner.limits import Limits, format_bytes  # noqa: E402
from tools_app.runner.records import Artifact  # noqa: E402
from tools_app.runner.redact import Redactor  # noqa: E402

# -- the walk before issue 19 (our own code, kept here to compare) ---------------------------

_SUFFIX = re.compile(r"\.[A-Za-z0-9]{1,10}")


def _old_files(output_dir: Path) -> list[Path]:
    found: list[Path] = []
    for root, dirs, names in os.walk(output_dir):
        dirs.sort()
        found += [Path(root) / name for name in sorted(names)]
    return found


def old_collect(
    output_dir: Path, into: Path, limits: Limits, redactor: Redactor, notices: list[str]
) -> list[Artifact]:
    found: list[Artifact] = []
    total = 0
    for path in _old_files(output_dir) if output_dir.is_dir() else []:
        name = redactor.redact(path.relative_to(output_dir).as_posix())
        if len(found) >= artifacts.MAX_FILES:
            notices.append(f"more than {artifacts.MAX_FILES} artifacts; the rest were skipped")
            break
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            notices.append(f"artifact {name!r} skipped: not a regular file")
            continue
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                notices.append(f"artifact {name!r} skipped: not a regular file")
                continue
            if info.st_size > limits.max_artifact_bytes:
                largest = format_bytes(limits.max_artifact_bytes)
                notices.append(f"artifact {name!r} skipped: larger than {largest}")
                continue
            if total + info.st_size > limits.max_artifacts_total:
                notices.append(
                    f"artifact {name!r} skipped: the run's artifacts exceed "
                    f"{format_bytes(limits.max_artifacts_total)}"
                )
                continue
            into.mkdir(parents=True, exist_ok=True)
            suffix = PurePosixPath(name).suffix
            target = into / f"{len(found) + 1:04d}{suffix if _SUFFIX.fullmatch(suffix) else ''}"
            size = artifacts._copy(fd, target, info.st_size)
        finally:
            os.close(fd)
        total += size
        size = artifacts._redact_content(target, name, redactor, notices)
        found.append(Artifact(name=name, path=target, size=size))
    return found


# -- the trees ----------------------------------------------------------------------------------


def tree(base: Path, kind: str) -> None:
    out = base / artifacts.OUTPUT
    out.mkdir(parents=True)
    if kind == "1 file":
        (out / "report.txt").write_bytes(b"x" * 100)
    elif kind == "100 files":
        for n in range(100):
            (out / f"f{n:03d}.txt").write_bytes(b"x" * 100)
    elif kind == "nested":
        folders = [out]
        for _ in range(3):
            folders = [f / f"d{n}" for f in folders for n in range(4)]
        for folder in folders:
            folder.mkdir(parents=True)
            for n in range(2):
                (folder / f"f{n}.txt").write_bytes(b"x" * 100)


def per_call(fn: Callable[[Path], object], scratch: Path, calls: int) -> float:
    """µs per call, best of 7 batches; each call copies into a fresh folder."""
    best = float("inf")
    for batch in range(7):
        intos = [scratch / f"{batch}-{n}" for n in range(calls)]
        start = time.perf_counter()
        for into in intos:
            fn(into)
        best = min(best, (time.perf_counter() - start) / calls)
        shutil.rmtree(scratch, ignore_errors=True)
        scratch.mkdir()
    return best * 1e6


def main() -> None:
    limits, redactor = Limits(), Redactor({"{{s.TOKEN}}": "sk-live-0123456789abcdef"})
    plain = Redactor({})
    print(f"{'tree':12s} {'redactor':9s} {'old µs':>9s} {'new µs':>9s} {'new - old':>10s}")
    # On a tmpfs, as a run's output folder is (quota.py): the disk's own cost of creating
    # the copies would hide the walk's, and is the same for both.
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else None
    with tempfile.TemporaryDirectory(prefix="artifacts-walk-", dir=shm) as temp:
        root = Path(temp)
        for kind, calls in (("empty", 2000), ("1 file", 1000), ("100 files", 50), ("nested", 50)):
            base = root / kind.replace(" ", "-")
            tree(base, kind)
            scratch = root / "scratch"
            scratch.mkdir(exist_ok=True)
            for label, red in (("none", plain), ("1 secret", redactor)):
                old = per_call(
                    lambda into, r=red, b=base: old_collect(
                        b / artifacts.OUTPUT, into, limits, r, []
                    ),
                    scratch,
                    calls,
                )
                new = per_call(
                    lambda into, r=red, b=base: artifacts.collect(b, into, limits, r, []),
                    scratch,
                    calls,
                )
                print(f"{kind:12s} {label:9s} {old:9.1f} {new:9.1f} {new - old:+10.1f}")


if __name__ == "__main__":
    main()
