"""Mirror published tools into DATA_PATH/tools, where agents' tool loaders read them.

The console marks each folder it writes with MARKER, so it can tell its own folders from
ones someone else put there (those are reported, never deleted). Writes go to a sibling
folder first and are renamed into place, so an agent never reads a half-written tool.
A python or bash tool also gets the generated index.js (tools_app/catalog/shim), so loaders that
know only the seed's rules can run it; the marker keeps the version's own sha256.

Each folder also holds its version's signature (SIGNATURE_FILE, written inside the temporary
folder, so never half-written), and DATA_PATH/tools holds what on-disk verifiers check it
with (docs/signing.md, "On disk"): KEYS_FILE, the keys.json envelope, and ROOT_FILE, the
console's root public key."""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from tools_app.catalog import bundle, shim
from tools_app.signing import keyring, statement
from tools_app.signing import versions as signed_versions

MARKER = statement.MARKER_FILE
SIGNATURE_FILE = statement.SIGNATURE_FILE
KEYS_FILE = ".tool-keys.json"
ROOT_FILE = ".tool-root.json"


@dataclass(frozen=True)
class Prepared:
    """A published version's delivered files, rendered already by whoever published it."""

    version_id: int
    files: dict[str, bytes]


@dataclass(frozen=True)
class MirrorResult:
    name: str
    action: str  # written | unchanged | removed | absent | foreign | refused
    version: int | None = None
    # refused: what is wrong with the version against its signature.
    problems: tuple[str, ...] = ()


def tools_dir(data_path: Path | None = None) -> Path:
    return Path(data_path or settings.DATA_PATH) / "tools"


@contextmanager
def _locked(root: Path) -> Iterator[None]:
    # Several web processes may start (and sync) at once: one writer at a time.
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def read_marker(folder: Path) -> dict | None:
    try:
        data = json.loads((folder / MARKER).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _current_sha(folder: Path) -> str | None:
    try:
        files = bundle.read_tool_dir(folder)
    except (OSError, bundle.BundleError):
        return None
    files.pop(MARKER, None)
    return bundle.canonical_sha256(files)


def mirror_tool(
    name: str, data_path: Path | None = None, prepared: Prepared | None = None
) -> MirrorResult:
    """Bring DATA_PATH/tools/<name> in line with the database for one tool."""
    from tools_app.models import Tool

    root = tools_dir(data_path)
    tool = Tool.objects.select_related("published_version").filter(name=name).first()
    with _locked(root):
        _write_trust(root)
        return _mirror(root, name, tool, prepared)


def _mirror(root: Path, name: str, tool, prepared: Prepared | None = None) -> MirrorResult:
    folder = root / name
    version = tool.published_version if tool is not None and tool.enabled else None
    if version is None:
        if folder.exists() and (read_marker(folder) or {}).get("name") == name:
            _remove(folder)
            return MirrorResult(name, "removed")
        return MirrorResult(name, "absent")

    if prepared is not None and prepared.version_id == version.pk:
        files = dict(prepared.files)
    else:
        files = shim.mirror_files(version.file_bytes(), version.manifest)
    if version.signature:
        files[SIGNATURE_FILE] = (json.dumps(version.signature, indent=2) + "\n").encode()
    marker = read_marker(folder) if folder.exists() else None
    if (
        marker is not None
        and marker.get("version") == version.number
        and marker.get("sha256") == version.sha256
        and _current_sha(folder) == bundle.canonical_sha256(files)
    ):
        return MirrorResult(name, "unchanged", version.number)
    if folder.exists() and marker is None:
        # Not ours: never overwrite someone else's folder.
        return MirrorResult(name, "foreign", version.number)
    # What a loader would run must be what was signed: a version changed in the database
    # after it was published is not written (the folder keeps what was there before).
    delivered = {path: data for path, data in files.items() if path != SIGNATURE_FILE}
    problems = signed_versions.verify(version, files=delivered)
    if problems:
        return MirrorResult(name, "refused", version.number, tuple(problems))
    files[MARKER] = json.dumps(
        {"name": name, "version": version.number, "sha256": version.sha256}, sort_keys=True
    ).encode()
    bundle.write_tool_dir_atomic(folder, files)
    return MirrorResult(name, "written", version.number)


def _remove(folder: Path) -> None:
    # Moved aside whole (readers see the whole folder or nothing), deleted after a grace.
    bundle.retire(folder)
    bundle.sweep_retired(folder.parent)


def mirror_all(data_path: Path | None = None) -> tuple[list[MirrorResult], list[str]]:
    """Mirror every tool; return the results and the names of foreign folders."""
    from tools_app.models import Tool

    root = tools_dir(data_path)
    results = []
    with _locked(root):
        _write_trust(root)
        tools = Tool.objects.select_related("published_version")
        known = set()
        for tool in tools:
            known.add(tool.name)
            results.append(_mirror(root, tool.name, tool))
        foreign = sorted(
            entry.name
            for entry in root.iterdir()
            if not entry.name.startswith(".")
            and (entry.name not in known or not entry.is_dir() or read_marker(entry) is None)
        )
    return results, foreign


def write_trust(data_path: Path | None = None) -> None:
    """Refresh KEYS_FILE and ROOT_FILE (after a key ring change)."""
    root = tools_dir(data_path)
    with _locked(root):
        _write_trust(root)


def _write_trust(root: Path) -> None:
    try:
        documents = {KEYS_FILE: keyring.keys_document(), ROOT_FILE: keyring.root_document()}
    except keyring.SigningKeyMissing:
        return  # nothing to verify with yet; publishing is refused until there is
    for name, document in documents.items():
        data = (json.dumps(document, indent=2) + "\n").encode()
        path = root / name
        if path.is_file() and path.read_bytes() == data:
            continue
        temporary = root / f"{name}.tmp"
        temporary.write_bytes(data)
        os.chmod(temporary, 0o644)  # agents' loaders, other users, read them
        os.replace(temporary, path)
