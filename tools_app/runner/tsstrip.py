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

A worker warms the cache when it starts (warm(), from tools' files in memory, under the
keys prepare() computes from the same files on disk: one set of rules decides both).
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
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path, PurePosixPath

from . import sandbox

logger = logging.getLogger(__name__)

STRIPPER = sandbox.PACKAGE_DIR / "strip.mjs"
SUFFIXES = (".ts", ".mts")  # .cts is CommonJS: left to Node
FORMAT_VERSION = "1"  # change when strip.mjs's output for a source may change
STRIP_SECONDS = 30.0
MAX_SOURCE_BYTES = 4 << 20  # larger files are left to Node
SKIPPED_FOLDER = "node_modules"  # Node never strips there
WARM_BATCH_BYTES = 8 << 20  # sources per Node call at warm-up, about (STRIP_SECONDS bounds each)
NO_ENTRY = ".none"  # marks a source that strip.mjs left to Node (not asked again)
# Entries unused this long are removed (once per process and folder): every saved version
# adds one, and nothing else would ever remove them. A use refreshes an entry's mtime
# (at most once a day: no write per run).
UNUSED_SECONDS = 30 * 86400
TOUCH_SECONDS = 86400
_pruned: set[Path] = set()

Source = tuple[PurePosixPath, bytes, bool | None]  # path in the tool, bytes, module hint


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


def _module_hint(
    relative: PurePosixPath, package_json: Callable[[PurePosixPath], bytes | None]
) -> bool | None:
    """True: Node loads the file as an ES module whatever its syntax; None: Node looks at
    its syntax (strip.mjs does the same); False: CommonJS or unknown, left to Node.
    `package_json` gives a package.json's bytes by its path in the tool, None if absent."""
    if relative.suffix == ".mts":
        return True
    for parent in relative.parents:  # the nearest package.json decides, as in Node
        try:
            data = package_json(parent / "package.json")
            if data is None:
                continue
            kind = json.loads(data).get("type")
        except (OSError, ValueError, AttributeError):
            return False
        return True if kind == "module" else None if kind in (None, "") else False
    return None


def _candidate(relative: PurePosixPath) -> bool:
    """Whether the file is a TypeScript source the worker strips (by its path alone)."""
    return relative.suffix in SUFFIXES and SKIPPED_FOLDER not in relative.parent.parts


def _select(
    found: Iterable[tuple[PurePosixPath, int, Callable[[], bytes]]],
    package_json: Callable[[PurePosixPath], bytes | None],
) -> list[Source]:
    """The sources to strip among `found` (path, size, read), with their module hints:
    the one set of rules for a tool on disk (prepare) and in memory (warm)."""
    sources = []
    for relative, size, read in found:
        if not _candidate(relative):
            continue
        hint = _module_hint(relative, package_json)
        if hint is False or size > MAX_SOURCE_BYTES:
            continue
        sources.append((relative, read(), hint))
    return sources


def _sources(tool_dir: Path) -> list[Source]:
    def files() -> Iterator[tuple[PurePosixPath, int, Callable[[], bytes]]]:
        for folder, dirs, names in os.walk(tool_dir):
            dirs[:] = [d for d in dirs if d != SKIPPED_FOLDER]
            for name in names:
                path = Path(folder) / name
                relative = PurePosixPath(path.relative_to(tool_dir).as_posix())
                if not _candidate(relative) or path.is_symlink():
                    continue
                yield relative, path.stat().st_size, path.read_bytes

    def package_json(relative: PurePosixPath) -> bytes | None:
        path = tool_dir / relative
        return path.read_bytes() if path.is_file() else None

    return _select(files(), package_json)


def _sources_in_memory(files: Mapping[str, bytes]) -> list[Source]:
    by_path = {PurePosixPath(name): data for name, data in files.items()}
    found = [(relative, len(data), lambda d=data: d) for relative, data in by_path.items()]
    return _select(found, by_path.get)


def _key(identity: str, hint: bool | None, source: bytes) -> str:
    digest = hashlib.sha256(f"{FORMAT_VERSION}\0{identity}\0{hint}\0".encode())
    digest.update(source)
    return digest.hexdigest()


def _missing(
    cache: Path, identity: str, sources: list[Source]
) -> tuple[list[tuple[PurePosixPath, str]], dict[str, tuple[bytes, bool | None]]]:
    """Each source's key, and the sources without an entry (found entries are marked used)."""
    keyed: list[tuple[PurePosixPath, str]] = []
    missing: dict[str, tuple[bytes, bool | None]] = {}
    for relative, source, hint in sources:
        key = _key(identity, hint, source)
        keyed.append((relative, key))
        if key not in missing and not _has_entry(cache, key):
            missing[key] = (source, hint)
    return keyed, missing


def _has_entry(cache: Path, key: str) -> bool:
    return _used(cache / f"{key}.js") or _used(cache / f"{key}{NO_ENTRY}")


def prepare(tool_dir: Path, cache: Path) -> dict[PurePosixPath, Path]:
    """Path relative to the tool folder -> its stripped JavaScript in the cache, for
    every TypeScript file of the tool that has one; strips the sources not seen before.
    Never raises for anything in the tool: a file without an entry is left to Node."""
    node = sandbox.node_executable()
    keyed, missing = _missing(cache, _node_identity(node), _sources(Path(tool_dir)))
    if missing:
        _strip(node, cache, missing)
    entries: dict[PurePosixPath, Path] = {}
    for relative, key in keyed:
        if (cache / f"{key}.js").exists():
            entries[relative] = cache / f"{key}.js"
    return entries


def warm(tools: Iterable[Mapping[str, bytes]], cache: Path) -> int:
    """Strip the sources of `tools` (path -> bytes, as ToolVersion.file_bytes() gives)
    that have no entry yet, under the keys prepare() looks up for the same files on disk,
    so a worker's first run of a tool finds them; in one Node call unless they exceed
    WARM_BATCH_BYTES. How many got JavaScript. Never raises: a failure only logs."""
    try:
        node = sandbox.node_executable()
        identity = _node_identity(node)
        stripped, batch, size = 0, {}, 0
        for files in tools:  # a batch is stripped once full: only it stays in memory
            found = _missing(cache, identity, _sources_in_memory(files))[1]
            batch |= found
            size += sum(len(source) for source, _ in found.values())
            if size > WARM_BATCH_BYTES:
                stripped += _strip(node, cache, batch)
                batch, size = {}, 0
        if batch:
            stripped += _strip(node, cache, batch)
        return stripped
    except Exception:  # a warm-up is an optimization: a run strips what is missing
        logger.exception("could not warm the TypeScript strip cache %s", cache)
        return 0


def _strip(node: str, cache: Path, missing: dict[str, tuple[bytes, bool | None]]) -> int:
    """Strip `missing` (key -> source, hint) into the cache; how many got JavaScript."""
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
        return 0
    if not isinstance(results, list) or len(results) != len(keys):
        logger.warning("TypeScript stripping failed: %s", done.stderr[-500:])
        return 0
    stripped = 0
    for key, result in zip(keys, results, strict=True):
        code = result.get("code") if isinstance(result, dict) else None
        if isinstance(code, str):
            _write(cache / f"{key}.js", code.encode())
            stripped += 1
        else:
            _write(cache / f"{key}{NO_ENTRY}", b"")
    return stripped


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
