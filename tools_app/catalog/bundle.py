"""Tool folders as data: {relative posix path: bytes}.

Reading, hashing, writing and zipping tool folders, with the limits every way in (seed,
editor, API, zip import) shares:

- MAX_FILE_BYTES: one file at most 1 MiB;
- MAX_TOOL_BYTES: a whole tool at most 5 MiB;
- MAX_FILES: at most 200 files in a tool.

Paths are relative, `/`-separated, UTF-8, without `.`/`..`/empty parts, backslashes, NUL or
control characters (see safe_relpath). Symbolic links and special files are refused, never
followed. Only obvious junk (JUNK_NAMES) is skipped when reading a folder.

canonical_sha256 (what sync clients recompute to check a download): SHA-256 over the files
in ascending order of their UTF-8 path bytes, each contributing
`len(path) as 8-byte big-endian || path || len(content) as 8-byte big-endian || content`.
"""

from __future__ import annotations

import ctypes
import hashlib
import io
import os
import re
import shutil
import stat
import tempfile
import time
import uuid
import zipfile
from collections.abc import Mapping
from pathlib import Path

MAX_FILE_BYTES = 1024 * 1024
MAX_TOOL_BYTES = 5 * 1024 * 1024
MAX_FILES = 200
MAX_PATH_CHARS = 1024
MAX_PART_BYTES = 255
# A zip of many tools (import_tools): uncompressed total and entry count.
MAX_ZIP_BYTES = 64 * 1024 * 1024
MAX_ZIP_ENTRIES = 5000

JUNK_NAMES = frozenset({"__pycache__", ".DS_Store", "node_modules"})
ZIP_JUNK_FOLDERS = frozenset({"__MACOSX"})
EXECUTABLES = frozenset({"index.sh"})
ZIP_DATE_TIME = (1980, 1, 1, 0, 0, 0)

_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")
_DRIVE_RE = re.compile(r"[A-Za-z]:")


class BundleError(ValueError):
    """A tool folder that cannot be read, written or trusted as it is."""


def safe_relpath(p: str) -> str:
    """Return `p` unchanged if it is a safe relative posix path, else raise BundleError."""
    if not isinstance(p, str) or not p:
        raise BundleError(f"{p!r}: a file path must be a non-empty string")
    shown = p.encode("utf-8", "backslashreplace").decode("ascii", "backslashreplace")
    if "\\" in p:
        raise BundleError(f"{shown}: backslashes are not allowed in file paths")
    if _CONTROL_RE.search(p):
        raise BundleError(f"{shown}: control characters are not allowed in file paths")
    if p.startswith("/"):
        raise BundleError(f"{shown}: absolute paths are not allowed")
    try:
        p.encode("utf-8")
    except UnicodeEncodeError:
        raise BundleError(f"{shown}: file paths must be valid UTF-8") from None
    if len(p) > MAX_PATH_CHARS:
        raise BundleError(f"{shown[:60]}...: path longer than {MAX_PATH_CHARS} characters")
    parts = p.split("/")
    if _DRIVE_RE.fullmatch(parts[0]):
        raise BundleError(f"{shown}: drive letters are not allowed")
    for part in parts:
        if part in ("", ".", ".."):
            raise BundleError(f"{shown}: empty, '.' and '..' path parts are not allowed")
        if len(part.encode("utf-8")) > MAX_PART_BYTES:
            raise BundleError(f"{shown}: a path part is longer than {MAX_PART_BYTES} bytes")
    return p


def check_files(files: Mapping[str, bytes]) -> None:
    """Raise BundleError unless `files` is a tool folder within the limits."""
    if len(files) > MAX_FILES:
        raise BundleError(f"{len(files)} files; a tool may have at most {MAX_FILES}")
    total = 0
    folders: set[str] = set()
    for path, data in files.items():
        safe_relpath(path)
        if not isinstance(data, bytes):
            raise BundleError(f"{path}: content must be bytes, not {type(data).__name__}")
        if len(data) > MAX_FILE_BYTES:
            raise BundleError(
                f"{path}: {len(data)} bytes; a file may have at most {MAX_FILE_BYTES}"
            )
        total += len(data)
        parts = path.split("/")
        folders.update("/".join(parts[:i]) for i in range(1, len(parts)))
    if total > MAX_TOOL_BYTES:
        raise BundleError(f"{total} bytes in all; a tool may have at most {MAX_TOOL_BYTES}")
    clashes = sorted(folders.intersection(files))
    if clashes:
        raise BundleError(f"{clashes[0]}: is both a file and a folder")


def read_tool_dir(path: Path) -> dict[str, bytes]:
    """Read a tool folder into {relative posix path: bytes}, in sorted order.

    The folder itself may be reached through a symlink; anything inside it that is a
    symlink or not a regular file or folder is refused, as are folders over the limits."""
    root = Path(path)
    if not root.is_dir():
        raise BundleError(f"{root}: not a folder")
    files: dict[str, bytes] = {}
    total = 0
    folders = 0
    pending: list[tuple[str, str]] = [(str(root), "")]  # (folder on disk, relative prefix)
    while pending:
        folder, prefix = pending.pop()
        with os.scandir(folder) as entries:
            listing = sorted(entries, key=lambda e: e.name)
        for entry in listing:
            if entry.name in JUNK_NAMES:
                continue
            rel = prefix + entry.name
            if entry.is_symlink():
                raise BundleError(f"{rel}: symbolic links are not allowed in a tool folder")
            if entry.is_dir(follow_symlinks=False):
                folders += 1
                if folders > MAX_FILES:
                    raise BundleError(f"more than {MAX_FILES} folders in a tool")
                safe_relpath(rel)
                pending.append((entry.path, rel + "/"))
            elif entry.is_file(follow_symlinks=False):
                safe_relpath(rel)
                if len(files) >= MAX_FILES:
                    raise BundleError(
                        f"more than {MAX_FILES} files; a tool may have at most {MAX_FILES}"
                    )
                files[rel] = _read_regular(entry.path, rel)
                total += len(files[rel])
                if total > MAX_TOOL_BYTES:
                    raise BundleError(f"more than {MAX_TOOL_BYTES} bytes in all; that is the limit")
            else:
                raise BundleError(f"{rel}: not a regular file (device, socket or pipe)")
    return dict(sorted(files.items()))


def _read_regular(path: str, rel: str) -> bytes:
    # O_NOFOLLOW and fstat: the file cannot be swapped for a link or a FIFO meanwhile.
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise BundleError(f"{rel}: cannot be read ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise BundleError(f"{rel}: not a regular file")
        if info.st_size > MAX_FILE_BYTES:
            raise BundleError(
                f"{rel}: {info.st_size} bytes; a file may have at most {MAX_FILE_BYTES}"
            )
        data = f.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise BundleError(f"{rel}: more than {MAX_FILE_BYTES} bytes")
    return data


def canonical_sha256(files: Mapping[str, bytes]) -> str:
    """A hash of the folder's paths and contents, independent of dict order."""
    digest = hashlib.sha256()
    encoded = sorted((safe_relpath(path).encode("utf-8"), path) for path in files)
    for raw, path in encoded:
        data = files[path]
        digest.update(len(raw).to_bytes(8, "big"))
        digest.update(raw)
        digest.update(len(data).to_bytes(8, "big"))
        digest.update(data)
    return digest.hexdigest()


def file_mode(path: str) -> int:
    return 0o755 if path in EXECUTABLES else 0o644


def write_tool_dir_atomic(dest: Path, files: Mapping[str, bytes]) -> None:
    """Replace `dest` with exactly `files`, so that readers see the old or the new folder.

    Writes into a temporary sibling (same filesystem), fsyncs, then swaps it in with one
    renameat2(RENAME_EXCHANGE) where the kernel has it, else renames the old folder away
    and the new one in (a moment without `dest`, never a half-written one)."""
    check_files(files)
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.tmp-", dir=dest.parent))
    try:
        os.chmod(tmp, 0o755)  # noqa: S103 (agents' loaders, other users, read tools)
        _write_tree(tmp, files)
        if os.path.lexists(dest):
            _swap_in(tmp, dest)
            retire(tmp, dest.name)  # the old folder now: a reader may still be listing it
        else:
            os.rename(tmp, dest)
        _fsync_dir(dest.parent)
    finally:
        _remove_any(tmp)
        sweep_retired(dest.parent)


# A folder swapped out (or removed) is kept this long under a dot name before it is deleted:
# a reader that opened it just before the swap still lists and reads it whole, instead of
# watching it being deleted under it.
RETIRE_GRACE_SECONDS = 60
RETIRED = ".retired-"


def retire(folder: Path, name: str | None = None) -> None:
    """Move `folder` (the old version of tool `name`) aside to a dot name, never listed as a
    tool, for a later sweep to delete."""
    if os.path.lexists(folder):
        name = f".{name or folder.name}{RETIRED}{int(time.time())}-{uuid.uuid4().hex[:8]}"
        os.rename(folder, folder.with_name(name))


def sweep_retired(parent: Path, grace: float = RETIRE_GRACE_SECONDS) -> None:
    """Delete folders `retire` moved aside more than `grace` seconds ago."""
    cutoff = time.time() - grace
    for entry in Path(parent).glob(f".*{RETIRED}*"):
        stamp = entry.name.rsplit(RETIRED, 1)[-1].split("-", 1)[0]
        if not stamp.isdigit() or int(stamp) < cutoff:
            _remove_any(entry)


def _write_tree(root: Path, files: Mapping[str, bytes]) -> None:
    folders = {root}
    for rel in sorted(files):
        target = root / rel
        parent = target.parent
        if parent not in folders:
            parent.mkdir(parents=True, exist_ok=True)
            for folder in (parent, *parent.parents):
                if folder == root:
                    break
                os.chmod(folder, 0o755)  # noqa: S103 (see above)
                folders.add(folder)
        mode = file_mode(rel)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(files[rel])
            f.flush()
            os.fchmod(fd, mode)  # umask must not change the mode
            os.fsync(fd)
    for folder in folders:
        _fsync_dir(folder)


def _swap_in(new: Path, dest: Path) -> None:
    """Put `new` at `dest`; afterwards `new` names the old folder (or nothing)."""
    if _exchange(new, dest):
        return
    old = dest.with_name(f".{dest.name}.old-{uuid.uuid4().hex[:8]}")
    os.rename(dest, old)
    try:
        os.rename(new, dest)
    except OSError:
        os.rename(old, dest)  # put the old folder back rather than leave nothing
        raise
    os.rename(old, new)


_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two paths with Linux renameat2; False where it is unavailable."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    c_int, c_path = ctypes.c_int, ctypes.c_char_p
    renameat2.argtypes = [c_int, c_path, c_int, c_path, ctypes.c_uint]
    renameat2.restype = ctypes.c_int
    result = renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    return result == 0


def _remove_any(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink(missing_ok=True)
    elif path.exists():
        shutil.rmtree(path, ignore_errors=True)


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems cannot fsync a directory; the data is already synced
    finally:
        os.close(fd)


def zip_bytes(name: str, files: Mapping[str, bytes]) -> bytes:
    """A zip holding the folder `name/` with `files`; same input, same bytes."""
    safe_relpath(name)
    if "/" in name:
        raise BundleError(f"{name}: a tool folder name has no '/'")
    check_files(files)
    folders = {name}
    for path in files:
        parts = path.split("/")
        folders.update(f"{name}/" + "/".join(parts[:i]) for i in range(1, len(parts)))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for folder in sorted(folders):
            info = zipfile.ZipInfo(folder + "/", date_time=ZIP_DATE_TIME)
            info.create_system = 3  # unix, so external_attr carries the mode
            info.external_attr = (stat.S_IFDIR | 0o755) << 16 | 0x10
            archive.writestr(info, b"")
        for path in sorted(files):
            info = zipfile.ZipInfo(f"{name}/{path}", date_time=ZIP_DATE_TIME)
            info.create_system = 3
            info.external_attr = (stat.S_IFREG | file_mode(path)) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, files[path], compresslevel=6)
    return buffer.getvalue()


def read_zip(data: bytes) -> dict[str, dict[str, bytes]]:
    """Read a zip of tool folders ({folder: files}), as zip_bytes writes them.

    Every top-level folder is one tool. Unsafe paths, links, encrypted entries and sizes
    over the limits raise BundleError; nothing is extracted to disk."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, ValueError, OSError) as exc:
        raise BundleError(f"not a readable zip file: {exc}") from None
    tools: dict[str, dict[str, bytes]] = {}
    total = 0
    with archive:
        infos = archive.infolist()
        if len(infos) > MAX_ZIP_ENTRIES:
            raise BundleError(f"{len(infos)} zip entries; at most {MAX_ZIP_ENTRIES}")
        for info in infos:
            name = info.filename
            parts = name.rstrip("/").split("/")
            if parts[0] in ZIP_JUNK_FOLDERS or any(p in JUNK_NAMES for p in parts):
                continue
            safe_relpath(name.rstrip("/"))
            if info.is_dir():
                tools.setdefault(parts[0], {})
                continue
            if stat.S_ISLNK(info.external_attr >> 16):
                raise BundleError(f"{name}: symbolic links are not allowed")
            if len(parts) == 1:
                if name == "TOOL.md":
                    raise BundleError("TOOL.md is at the zip's root: put the tool in a folder")
                continue  # a README beside the tool folders
            if info.file_size > MAX_FILE_BYTES:
                raise BundleError(
                    f"{name}: {info.file_size} bytes; a file may have at most {MAX_FILE_BYTES}"
                )
            total += info.file_size
            if total > MAX_ZIP_BYTES:
                raise BundleError(f"more than {MAX_ZIP_BYTES} bytes uncompressed")
            content = _read_member(archive, info)
            tools.setdefault(parts[0], {})["/".join(parts[1:])] = content
    for folder, files in tools.items():
        try:
            check_files(files)
        except BundleError as exc:
            raise BundleError(f"{folder}: {exc}") from None
    return {folder: dict(sorted(files.items())) for folder, files in sorted(tools.items())}


def _read_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> bytes:
    try:
        with archive.open(info) as member:
            content = member.read(MAX_FILE_BYTES + 1)
    except (RuntimeError, zipfile.BadZipFile, NotImplementedError, OSError) as exc:
        raise BundleError(f"{info.filename}: cannot be read from the zip: {exc}") from None
    # The declared size may lie: the read above is capped regardless.
    if len(content) > MAX_FILE_BYTES:
        raise BundleError(f"{info.filename}: more than {MAX_FILE_BYTES} bytes")
    return content
