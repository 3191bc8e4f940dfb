"""Copy the files a tool left in TOOL_OUTPUT_DIR out of its work dir, within the limits."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path, PurePosixPath

from .limits import Limits, format_bytes
from .records import Artifact
from .redact import Redactor

MAX_FILES = 1000
_SUFFIX = re.compile(r"\.[A-Za-z0-9]{1,10}")


def _files(output_dir: Path) -> list[Path]:
    found: list[Path] = []
    for root, dirs, names in os.walk(output_dir):  # never follows symlinked directories
        dirs.sort()
        found += [Path(root) / name for name in sorted(names)]
    return found


def _copy(source_fd: int, target: Path, size: int) -> int:
    """Copy at most `size` bytes: a file still growing cannot exceed what was checked."""
    copied = 0
    with open(target, "xb") as out:
        while copied < size and (chunk := os.read(source_fd, min(1 << 20, size - copied))):
            out.write(chunk)
            copied += len(chunk)
    return copied


def _redact_content(target: Path, name: str, redactor: Redactor, notices: list[str]) -> int:
    """Replace the secrets in a copied artifact (DESIGN.md section 3: the content of text
    artifacts). Binary content is searched too, for the longer forms only: a secret in a
    binary file is replaced even though that may break the file, and a notice says so."""
    if not redactor.active:
        return target.stat().st_size
    data = target.read_bytes()
    redacted, is_text, changed = redactor.redact_bytes(data)
    if changed:
        target.write_bytes(redacted)
        if not is_text:
            notices.append(
                f"artifact {name!r}: secret values found in its binary content were replaced "
                "by their labels; the file may no longer open"
            )
    return len(redacted)


def collect(
    output_dir: Path, into: Path, limits: Limits, redactor: Redactor, notices: list[str]
) -> list[Artifact]:
    """Regular files only (a symlink could point anywhere on the host), each at most
    max_artifact_bytes, max_artifacts_total in all. Names and content are redacted; copies
    are numbered."""
    artifacts: list[Artifact] = []
    total = 0
    for path in _files(output_dir) if output_dir.is_dir() else []:
        name = redactor.redact(path.relative_to(output_dir).as_posix())
        if len(artifacts) >= MAX_FILES:
            notices.append(f"more than {MAX_FILES} artifacts; the rest were skipped")
            break
        try:
            # O_NONBLOCK: opening a FIFO must not wait for a writer.
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
            target = into / f"{len(artifacts) + 1:04d}{suffix if _SUFFIX.fullmatch(suffix) else ''}"
            size = _copy(fd, target, info.st_size)
        finally:
            os.close(fd)
        total += size
        size = _redact_content(target, name, redactor, notices)
        artifacts.append(Artifact(name=name, path=target, size=size))
    return artifacts
