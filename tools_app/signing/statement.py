"""The signed manifest of a version (docs/signing.md, "The signed manifest"): what is
delivered (every file with its sha256 and mode) and what a model sees (name, description,
input and output schema), each as hashes, plus who published it, when, and a per-tool
serial. `digest` is the pin value: it changes with the content, not with a new signature."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from datetime import datetime

from tools_app.catalog import bundle
from tools_app.manifest.schema import tool_entry
from tools_app.manifest.toolmd import Manifest
from tools_app.signing import canonical

TYPE = "tool-console/manifest"
FORMAT = 1
# Beside a tool's files on disk, never part of them (docs/signing.md, "On disk").
SIGNATURE_FILE = ".tool-signature.json"
MARKER_FILE = ".tool-console.json"
UNSIGNED_FILES = frozenset({SIGNATURE_FILE, MARKER_FILE})


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def model_view(manifest: Mapping) -> dict:
    """What a model is shown of the tool: the MCP entry's name, description and schemas."""
    entry = tool_entry(Manifest.from_dict(manifest), fmt="mcp")
    view = {k: entry[k] for k in ("name", "description", "inputSchema")}
    if "outputSchema" in entry:
        view["outputSchema"] = entry["outputSchema"]
    return view


def model_digest(view: Mapping) -> dict:
    outputs = view.get("outputSchema")
    return {
        "name": view["name"],
        "description": _sha256(view["description"].encode("utf-8")),
        "inputSchema": _sha256(canonical.dumps(view["inputSchema"])),
        "outputSchema": None if outputs is None else _sha256(canonical.dumps(outputs)),
        "sha256": _sha256(canonical.dumps(dict(view))),
    }


def file_entries(files: Mapping[str, bytes]) -> list[dict]:
    return [
        {
            "path": path,
            "size": len(files[path]),
            "sha256": _sha256(files[path]),
            "mode": bundle.file_mode(path),
        }
        for path in sorted(files)
        if path not in UNSIGNED_FILES
    ]


def build(
    name: str,
    number: int,
    manifest: Mapping,
    files: Mapping[str, bytes],
    *,
    publisher: str,
    published: datetime,
    serial: int,
    view: Mapping | None = None,
) -> dict:
    """The statement for version `number` of tool `name`; `files` are the delivered ones
    (shim.mirror_files), `view` its model_view() when the caller has it already."""
    delivered = {p: data for p, data in files.items() if p not in UNSIGNED_FILES}
    kind = manifest.get("kind", "code")
    signed = {
        "_type": TYPE,
        "format": FORMAT,
        "name": name,
        "version": number,
        "kind": kind,
        "language": None if kind == "http" else manifest.get("language"),
        "files": file_entries(delivered),
        "sha256": bundle.canonical_sha256(delivered),
        "model": model_digest(model_view(manifest) if view is None else view),
        "publisher": publisher,
        "published": canonical.timestamp(published),
        "serial": serial,
    }
    signed["digest"] = digest(signed)
    return signed


def digest(signed: Mapping) -> str:
    """The pin value: files and model view, not who signed or when."""
    return _sha256(
        canonical.dumps({"sha256": signed["sha256"], "model": signed["model"]["sha256"]})
    )


def shape_problems(signed: Mapping) -> list[str]:
    """A verified payload that is not a signed manifest of this format."""
    if signed.get("_type") != TYPE or signed.get("format") != FORMAT:
        return [f"not a signed tool manifest ({TYPE} format {FORMAT})"]
    files, model = signed.get("files"), signed.get("model")
    if not isinstance(files, list) or not all(isinstance(f, Mapping) for f in files):
        return ["the signed manifest has no file list"]
    if not isinstance(model, Mapping):
        return ["the signed manifest has no model hashes"]
    return []


def file_problems(signed: Mapping, files: Mapping[str, bytes]) -> list[str]:
    """How `files` (a tool folder, dot files of the console's own left out) differ from the
    signed file list; [] when they are exactly what was signed."""
    problems = shape_problems(signed)
    if problems:
        return problems
    listed = {entry.get("path"): entry for entry in signed["files"]}
    for path, entry in listed.items():
        if path not in files:
            problems.append(f"missing file {path}")
        elif len(files[path]) != entry.get("size") or _sha256(files[path]) != entry.get("sha256"):
            problems.append(f"{path} does not match its signed sha256")
        elif entry.get("mode") != bundle.file_mode(str(path)):
            problems.append(
                f"mode of {path} is signed as {_octal(entry.get('mode'))}, "
                f"but the console delivers it as {_octal(bundle.file_mode(str(path)))}"
            )
    problems += [
        f"unexpected file {path}"
        for path in sorted(files)
        if path not in listed and path not in UNSIGNED_FILES
    ]
    if not problems:
        delivered = {p: d for p, d in files.items() if p not in UNSIGNED_FILES}
        if bundle.canonical_sha256(delivered) != signed.get("sha256"):
            problems.append("the files do not match the signed sha256 of the whole tool")
    return problems


def _octal(mode: object) -> str:
    return oct(mode) if isinstance(mode, int) else repr(mode)


def model_problems(signed: Mapping, view: Mapping) -> list[str]:
    """How what a model would see (`view`, model_view()) differs from what was signed."""
    problems = shape_problems(signed)
    if problems:
        return problems
    signed_model = signed["model"]
    current = model_digest(view)
    if current["sha256"] == signed_model.get("sha256"):
        return []
    if current["name"] != signed_model.get("name"):
        problems.append(f"name {current['name']} does not match the signed manifest")
    for part in ("description", "inputSchema", "outputSchema"):
        if current[part] != signed_model.get(part):
            problems.append(f"{part} does not match the signed manifest")
    # Every part matches but the whole does not: something beside them changed.
    return problems or ["the model view does not match the signed manifest"]
