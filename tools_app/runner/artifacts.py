"""Copy the files a tool left in TOOL_OUTPUT_DIR out of its work dir, within the limits.

The runner reads the output folder as root, and the tool owned everything in it: it may
have replaced the folder itself by a link to /etc or the project, a folder inside it by a
link, or left a hard link, a FIFO or a device node there. So the walk starts from a
directory the worker made (the run's disk/, which the tool cannot change) and opens every
part below it relative to its parent's descriptor with O_NOFOLLOW: no link is followed at
any level, the top included, and a replaced top yields no artifacts and a notice saying
why. Only regular files with a single link, on the output folder's own file system, are
copied. Anything else is skipped from its directory entry, so a FIFO or device is never
opened; a file is opened with O_PATH first and reopened for reading through that
descriptor only once fstat says it is a regular file, so a swap in between cannot make
the runner open something else. The caps (files, bytes, entries looked at, depth) apply
while walking, so a huge tree costs no more than the caps allow.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from .limits import Limits, format_bytes
from .records import Artifact
from .redact import Redactor

MAX_FILES = 1000
MAX_ENTRIES = 10 * MAX_FILES  # directory entries looked at, of every kind
MAX_DEPTH = 32  # folders below the output folder
MAX_SKIP_NOTICES = 50  # one notice per skipped entry up to here, then a count
OUTPUT = PurePosixPath("home/output")  # TOOL_OUTPUT_DIR inside the run's disk/ (quota.py)
_SUFFIX = re.compile(r"\.[A-Za-z0-9]{1,10}")
# O_NONBLOCK: opening a FIFO must never wait for a writer (O_DIRECTORY refuses one anyway).
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_PATH_FLAGS = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


class _Stop(Exception):
    """A cap that ends the walk was reached (its notice is given)."""


LINK = "a link, not followed"


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return LINK
    if stat.S_ISDIR(mode):
        return "a folder"
    return "not a regular file"


def open_output(base: Path, relative: PurePosixPath, notices: list[str]) -> int | None:
    """A descriptor on `base`/`relative`, opened part by part without following a link,
    or None with a notice saying why (no host path in it). `base` is the worker's own."""
    fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    dev = os.fstat(fd).st_dev
    for part in relative.parts:
        try:
            child = os.open(part, _DIR_FLAGS, dir_fd=fd)
        except OSError:  # a link gives ELOOP, anything but a folder ENOTDIR
            notices.append(f"no artifacts: {_why_not(fd, part)}")
            os.close(fd)
            return None
        os.close(fd)
        fd = child
        if os.fstat(fd).st_dev != dev:
            notices.append("no artifacts: the output folder is on another file system")
            os.close(fd)
            return None
    return fd


def _why_not(parent: int, part: str) -> str:
    """Why `part` of the output folder's path could not be opened as a folder."""
    try:
        mode = os.stat(part, dir_fd=parent, follow_symlinks=False).st_mode
    except FileNotFoundError:
        return "the tool removed its output folder"
    except OSError:
        return "the output folder could not be read"
    if stat.S_ISLNK(mode):
        return "the tool replaced its output folder by a link"
    if not stat.S_ISDIR(mode):
        return "the tool replaced its output folder by something that is not a folder"
    return "the output folder could not be read"


@dataclass
class _Walk:
    into: Path
    limits: Limits
    redactor: Redactor
    notices: list[str]
    dev: int
    artifacts: list[Artifact] = field(default_factory=list)
    total: int = 0
    entries: int = 0  # directory entries looked at
    skipped: int = 0

    def skip(self, name: str, why: str) -> None:
        self.skipped += 1
        if self.skipped <= MAX_SKIP_NOTICES:
            self.notices.append(f"artifact {name!r} skipped: {why}")

    def listing(self, dir_fd: int) -> list[os.DirEntry[str]]:
        """The folder's entries by name, at most as many as the entry cap leaves."""
        found = []
        with os.scandir(dir_fd) as it:
            for entry in it:
                if self.entries >= MAX_ENTRIES:
                    self.notices.append(
                        f"the output folder holds more than {MAX_ENTRIES} entries; "
                        "the rest were not looked at"
                    )
                    raise _Stop
                self.entries += 1
                found.append(entry)
        found.sort(key=lambda entry: entry.name)
        return found

    def folder(self, dir_fd: int, prefix: str, depth: int) -> None:
        """The folder's files, then its folders (in name order, as os.walk did)."""
        folders = []
        try:
            entries = self.listing(dir_fd)
        except OSError:  # a folder the tool made unreadable (a worker that is not root)
            self.skip(self.redactor.redact(prefix.rstrip("/") or "."), "could not be read")
            return
        for entry in entries:
            relative = prefix + entry.name
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
                is_file = entry.is_file(follow_symlinks=False)
                is_link = entry.is_symlink()
            except OSError:
                continue  # gone meanwhile
            if is_dir:
                folders.append((entry.name, relative))
            elif is_file:
                self.file(dir_fd, entry.name, relative)
            else:
                name = self.redactor.redact(relative)
                self.skip(name, LINK if is_link else "not a regular file")
        for name, relative in folders:
            self.subfolder(dir_fd, name, relative, depth + 1)

    def subfolder(self, dir_fd: int, name: str, relative: str, depth: int) -> None:
        if depth > MAX_DEPTH:
            self.skip(self.redactor.redact(relative), f"nested deeper than {MAX_DEPTH} folders")
            return
        try:
            fd = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
        except OSError:  # replaced by a link or a file since the listing
            self.skip(self.redactor.redact(relative), "could not be opened as a folder")
            return
        try:
            if os.fstat(fd).st_dev != self.dev:
                self.skip(self.redactor.redact(relative), "on another file system")
                return
            self.folder(fd, relative + "/", depth)
        finally:
            os.close(fd)

    def file(self, dir_fd: int, entry_name: str, relative: str) -> None:
        name = self.redactor.redact(relative)
        if len(self.artifacts) >= MAX_FILES:
            self.notices.append(f"more than {MAX_FILES} artifacts; the rest were skipped")
            raise _Stop
        try:
            handle = os.open(entry_name, _PATH_FLAGS, dir_fd=dir_fd)  # opens nothing yet
        except OSError:
            self.skip(name, "not a regular file")
            return
        try:
            info = os.fstat(handle)
            if not stat.S_ISREG(info.st_mode):
                self.skip(name, _kind(info.st_mode))
                return
            if info.st_dev != self.dev:
                self.skip(name, "on another file system")
                return
            if info.st_nlink != 1:
                self.skip(name, "it has other hard links")
                return
            if info.st_size > self.limits.max_artifact_bytes:
                self.skip(name, f"larger than {format_bytes(self.limits.max_artifact_bytes)}")
                return
            if self.total + info.st_size > self.limits.max_artifacts_total:
                self.skip(
                    name,
                    f"the run's artifacts exceed {format_bytes(self.limits.max_artifacts_total)}",
                )
                return
            try:  # the same inode, now for reading: it is a regular file
                fd = os.open(f"/proc/self/fd/{handle}", _READ_FLAGS)
            except OSError:  # made unreadable by the tool (a worker that is not root)
                self.skip(name, "could not be read")
                return
        finally:
            os.close(handle)
        try:
            self.into.mkdir(parents=True, exist_ok=True)
            suffix = PurePosixPath(name).suffix
            number = f"{len(self.artifacts) + 1:04d}"
            target = self.into / f"{number}{suffix if _SUFFIX.fullmatch(suffix) else ''}"
            size = _copy(fd, target, info.st_size)
        finally:
            os.close(fd)
        self.total += size
        size = _redact_content(target, name, self.redactor, self.notices)
        self.artifacts.append(Artifact(name=name, path=target, size=size))


def _copy(source_fd: int, target: Path, size: int) -> int:
    """Copy at most `size` bytes: a file still growing cannot exceed what was checked."""
    copied = 0
    with open(target, "xb") as out:
        while copied < size and (chunk := os.read(source_fd, min(1 << 20, size - copied))):
            out.write(chunk)
            copied += len(chunk)
    return copied


def _redact_content(target: Path, name: str, redactor: Redactor, notices: list[str]) -> int:
    """Replace the secrets in a copied artifact (docs/security.md, "Redaction": the
    content of text artifacts). Binary content is searched too, for the longer forms only: a
    secret in a binary file is replaced even though that may break the file, and a notice says so.
    `target` is the worker's own copy (in the run's artifacts/, which the tool never saw)."""
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
    base: Path,
    into: Path,
    limits: Limits,
    redactor: Redactor,
    notices: list[str],
    relative: PurePosixPath = OUTPUT,
) -> list[Artifact]:
    """The artifacts in `base`/`relative` (the run's disk/ and TOOL_OUTPUT_DIR in it):
    regular files only, each at most max_artifact_bytes, max_artifacts_total in all, at
    most MAX_FILES. Names and content are redacted; copies are numbered."""
    top = open_output(base, relative, notices)
    if top is None:
        return []
    try:
        walk = _Walk(into, limits, redactor, notices, dev=os.fstat(top).st_dev)
        with contextlib.suppress(_Stop):
            walk.folder(top, "", 0)
    finally:
        os.close(top)
    if (more := walk.skipped - MAX_SKIP_NOTICES) > 0:
        notices.append(f"{more} more artifacts skipped (links, special files or over a limit)")
    return walk.artifacts
