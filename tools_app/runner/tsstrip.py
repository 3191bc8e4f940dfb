"""TypeScript tools' types stripped once per source by the worker, not in every sandbox.

Node strips a .ts file's types itself when it is imported, but loading its stripper (a
WebAssembly build of swc) costs each sandbox ~35 ms of CPU, more than the rest of a
trivial run. So the worker strips every .ts/.mts file of a tool with Node's own
`module.stripTypeScriptTypes` (mode "strip": types are blanked out, lines and columns stay
where they were) and keeps the result in a cache folder of its own, keyed by the sha256
of the source (with the Node binary and how the file is loaded), so a changed file never
meets an old entry. A run gets *copies* of its entries in its own folder, bound read-only
into the sandbox (standby.py); the harness loads them in place of the .ts files, at the
same file:///tool/... URLs, so import specifiers, import.meta.url and the positions in
stack traces are unchanged. Tools never see the cache: what a tool does to its copies
(it cannot write them) could not reach another run anyway.

Stripping runs no tool code: strip.mjs only rewrites and parses text, in a Node started
with --permission (no file system, no child processes). A file it cannot strip (a syntax
error, TypeScript that needs a transform, CommonJS, a format it cannot be sure of) gets
no entry: Node strips it in the sandbox as before and reports its errors as it always did.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import stat
import subprocess
import tempfile
import time
from pathlib import Path, PurePosixPath

from . import sandbox

logger = logging.getLogger(__name__)

STRIPPER = sandbox.PACKAGE_DIR / "strip.mjs"
SUFFIXES = (".ts", ".mts")  # .cts is CommonJS: left to Node
FORMAT_VERSION = "1"  # change when strip.mjs's output for a source may change
STRIP_SECONDS = 30.0
MAX_SOURCE_BYTES = 4 << 20  # larger files are left to Node
NO_ENTRY = ".none"  # marks a source that strip.mjs left to Node (not asked again)
# Entries unused this long are removed (once per process and folder): every saved version
# adds one, and nothing else would ever remove them. A use refreshes an entry's mtime
# (at most once a day: no write per run).
UNUSED_SECONDS = 30 * 86400
TOUCH_SECONDS = 86400
_pruned: set[Path] = set()


def cache_dir(folder: Path) -> Path | None:
    """The worker's cache under `folder`, made if missing; None if it is not a directory
    of this process's uid that no one else may write (then nothing is cached)."""
    path = Path(folder) / f"ts-stripped-{os.getuid()}"
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = path.lstat()
    except OSError:
        return None
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o022:
        logger.warning("%s is not a private directory of the worker: not used", path)
        return None
    if path not in _pruned:
        _pruned.add(path)
        prune(path)
    return path


def prune(cache: Path, now: float | None = None) -> int:
    """Remove the entries (and leftover temporary files) unused for UNUSED_SECONDS; how
    many. Another process may be about to copy one: copy_into then skips it, and Node
    strips that file in the sandbox as it would without a cache."""
    cutoff = (time.time() if now is None else now) - UNUSED_SECONDS
    removed = 0
    with contextlib.suppress(OSError), os.scandir(cache) as found:
        for entry in found:
            with contextlib.suppress(OSError):
                if entry.is_file(follow_symlinks=False) and entry.stat().st_mtime < cutoff:
                    os.unlink(entry.path)
                    removed += 1
    return removed


def _used(path: Path) -> bool:
    """Whether the entry exists, refreshing its mtime for prune() when it is old."""
    try:
        if time.time() - path.stat().st_mtime > TOUCH_SECONDS:
            os.utime(path)
    except OSError:
        return False
    return True


def _node_identity(node: str) -> str:
    info = os.stat(node)
    return f"{node}:{info.st_size}:{info.st_mtime_ns}"


def _module_hint(tool_dir: Path, relative: PurePosixPath) -> bool | None:
    """True: Node loads the file as an ES module whatever its syntax; None: Node looks at
    its syntax (strip.mjs does the same); False: CommonJS or unknown, left to Node."""
    if relative.suffix == ".mts":
        return True
    for parent in relative.parents:  # the nearest package.json decides, as in Node
        package = tool_dir / parent / "package.json"
        if package.is_file():
            try:
                kind = json.loads(package.read_bytes()).get("type")
            except (OSError, ValueError, AttributeError):
                return False
            return True if kind == "module" else None if kind in (None, "") else False
    return None


def _sources(tool_dir: Path) -> list[tuple[PurePosixPath, bytes, bool | None]]:
    found = []
    for folder, dirs, files in os.walk(tool_dir):
        dirs[:] = [d for d in dirs if d != "node_modules"]  # Node never strips there
        for name in files:
            path = Path(folder) / name
            if path.suffix not in SUFFIXES or path.is_symlink():
                continue
            relative = PurePosixPath(path.relative_to(tool_dir).as_posix())
            hint = _module_hint(tool_dir, relative)
            if hint is False or path.stat().st_size > MAX_SOURCE_BYTES:
                continue
            found.append((relative, path.read_bytes(), hint))
    return found


def _key(identity: str, hint: bool | None, source: bytes) -> str:
    digest = hashlib.sha256(f"{FORMAT_VERSION}\0{identity}\0{hint}\0".encode())
    digest.update(source)
    return digest.hexdigest()


def prepare(tool_dir: Path, cache: Path) -> dict[PurePosixPath, Path]:
    """Path relative to the tool folder -> its stripped JavaScript in the cache, for
    every TypeScript file of the tool that has one; strips the sources not seen before.
    Never raises for anything in the tool: a file without an entry is left to Node."""
    node = sandbox.node_executable()
    identity = _node_identity(node)
    entries: dict[PurePosixPath, Path] = {}
    missing: dict[str, tuple[bytes, bool | None]] = {}
    keyed: list[tuple[PurePosixPath, str]] = []
    for relative, source, hint in _sources(Path(tool_dir)):
        key = _key(identity, hint, source)
        keyed.append((relative, key))
        if not _used(cache / f"{key}.js") and not _used(cache / f"{key}{NO_ENTRY}"):
            missing[key] = (source, hint)
    if missing:
        _strip(node, cache, missing)
    for relative, key in keyed:
        if (cache / f"{key}.js").exists():
            entries[relative] = cache / f"{key}.js"
    return entries


def _strip(node: str, cache: Path, missing: dict[str, tuple[bytes, bool | None]]) -> None:
    keys = list(missing)
    files = [
        {"source": source.decode("utf-8", "replace"), "module": hint}
        for source, hint in missing.values()
    ]
    argv = [
        node,
        "--permission",
        f"--allow-fs-read={STRIPPER}",
        "--disable-warning=ExperimentalWarning",
        str(STRIPPER),
    ]
    try:
        done = subprocess.run(
            argv,
            input=json.dumps({"files": files}).encode(),
            capture_output=True,
            timeout=STRIP_SECONDS,
            env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
            cwd=cache,
            check=False,
        )
        results = json.loads(done.stdout) if done.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, ValueError) as exc:
        logger.warning("TypeScript stripping failed: %s", exc)
        return
    if not isinstance(results, list) or len(results) != len(keys):
        logger.warning("TypeScript stripping failed: %s", done.stderr[-500:])
        return
    for key, result in zip(keys, results, strict=True):
        code = result.get("code") if isinstance(result, dict) else None
        if isinstance(code, str):
            _write(cache / f"{key}.js", code.encode())
        else:
            _write(cache / f"{key}{NO_ENTRY}", b"")


def _write(path: Path, data: bytes) -> None:
    """Atomically: another worker process may be reading or writing the same entry."""
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.chmod(temp, 0o644)
        os.replace(temp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


def copy_into(entries: dict[PurePosixPath, Path], folder: Path, inside: str) -> dict[str, str]:
    """Copy the entries into a run's `folder` (seen at `inside` in the sandbox): the
    sandbox path of each .ts file -> the sandbox path of its JavaScript."""
    loads = {}
    for index, (relative, cached) in enumerate(sorted(entries.items())):
        try:
            shutil.copyfile(cached, folder / f"{index}.js")
        except FileNotFoundError:  # pruned meanwhile: Node strips this file itself
            continue
        os.chmod(folder / f"{index}.js", 0o644)
        loads[f"{sandbox.SANDBOX_TOOL}/{relative}"] = f"{inside}/{index}.js"
    return loads
