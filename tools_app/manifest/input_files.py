"""`file` and `file[]` inputs (docs/tool-format.md). No HTTP here.

A file travels in params as `{"name", "mime_type", "data"}` with `data` in base64: the API
takes it so and the run form builds the same object from an upload, so both are checked
alike (schema.validate_params calls problems()). Each file is at most MAX_FILE bytes once
decoded. Names are reduced to a plain file name (no folders, no `..`, no control
characters), so nothing a caller names can point outside the folder it is written to.

- In the run record the object keeps its name, type and size only; the bytes travel in
  the run's sealed params (runs.split_sensitive), which are dropped when the run starts.
- Code tools get each file written into their work dir under `inputs/<input>/` and the
  param holds its path (a list of paths for `file[]`) — see files_for_code().
- Http tools get the object itself: a body template `{{input}}` puts it in the JSON body
  as `{"name", "mime_type", "data"}` (base64), like the API received it.
"""

from __future__ import annotations

import base64
import binascii
import re
import unicodedata
from pathlib import PurePosixPath
from typing import Any

from tools_app.manifest.toolmd import Manifest

MAX_FILE = 10 * 1024 * 1024
FILE_TYPES = ("file", "file[]")
INPUTS_DIR = "inputs"
_UNSAFE = re.compile(r"[^\w.+@=-]+")
MAX_NAME = 120


def safe_name(name: str) -> str:
    """A plain file name: the last path part, control and odd characters replaced,
    no leading dots (no hidden files, never `.` or `..`)."""
    name = unicodedata.normalize("NFC", str(name)).replace("\\", "/")
    name = PurePosixPath(name).name
    name = "".join(ch for ch in name if unicodedata.category(ch)[0] != "C")
    name = _UNSAFE.sub("_", name).lstrip(".")
    if len(name) > MAX_NAME:
        stem, dot, suffix = name.rpartition(".")
        keep = suffix[:16] if dot else ""
        name = (stem if dot else name)[: MAX_NAME - len(keep) - 1] + (f".{keep}" if keep else "")
    return name or "file"


def decoded(value: dict[str, Any]) -> bytes:
    """The bytes of a file object already checked by problems()."""
    return base64.b64decode(value["data"])


def _problem(path: str, value: Any) -> str | None:
    if not isinstance(value, dict) or not isinstance(value.get("data"), str):
        return None  # the JSON Schema names the shape problem
    data = value["data"]
    # 4 base64 characters carry 3 bytes: refuse an oversized file before decoding it.
    if len(data) > (MAX_FILE // 3 + 1) * 4 + 4:
        return f"{path}: the file is larger than {MAX_FILE // (1024 * 1024)} MiB"
    try:
        size = len(base64.b64decode(data, validate=True))
    except (binascii.Error, ValueError):
        return f"{path}: data is not valid base64"
    if size > MAX_FILE:
        return f"{path}: the file is larger than {MAX_FILE // (1024 * 1024)} MiB"
    return None


def problems(manifest: Manifest, params: dict[str, Any]) -> list[str]:
    """Size and encoding problems of the file inputs in `params`; names are made safe in
    place (a caller's name is a label, never a path)."""
    found = []
    for name, spec in manifest.inputs.items():
        if spec.type not in FILE_TYPES or name not in params:
            continue
        value = params[name]
        items = value if spec.type == "file[]" and isinstance(value, list) else [value]
        for index, item in enumerate(items):
            path = f"{name}.{index}" if spec.type == "file[]" else name
            problem = _problem(path, item)
            if problem:
                found.append(problem)
            elif isinstance(item, dict) and isinstance(item.get("name"), str):
                item["name"] = safe_name(item["name"])
    return found


def without_data(manifest: Manifest, params: Any) -> Any:
    """`params` with the base64 data of file inputs left out (for size caps on the rest)."""
    if not isinstance(params, dict):
        return params
    counted = dict(params)
    for name, spec in manifest.inputs.items():
        if spec.type in FILE_TYPES and name in counted:
            value = counted[name]
            items = value if isinstance(value, list) else [value]
            counted[name] = [
                {k: v for k, v in item.items() if k != "data"} if isinstance(item, dict) else item
                for item in items
            ]
    return counted


def summary(value: Any) -> Any:
    """What the run record keeps of a file object (or a list of them): no bytes."""
    if isinstance(value, list):
        return [summary(item) for item in value]
    if isinstance(value, dict) and isinstance(value.get("data"), str):
        size = len(base64.b64decode(value["data"]))
        return {"name": value.get("name"), "mime_type": value.get("mime_type"), "size": size}
    return value


def files_for_code(
    manifest: Manifest, params: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, bytes], tuple[str, ...]]:
    """(params with each file replaced by its path relative to the work dir, the files by
    that path, the names of the params that hold paths). The runner writes the files and
    makes the paths absolute as the tool sees them."""
    params = dict(params)
    files: dict[str, bytes] = {}
    names = []
    for name, spec in manifest.inputs.items():
        if spec.type not in FILE_TYPES or params.get(name) is None:
            continue
        value = params[name]
        items = value if isinstance(value, list) else [value]
        paths = []
        for item in items:
            base = safe_name(item.get("name") or "file")
            rel = f"{INPUTS_DIR}/{name}/{base}"
            counter = 1
            while rel in files:
                counter += 1
                stem, dot, suffix = base.rpartition(".")
                rel = f"{INPUTS_DIR}/{name}/" + (
                    f"{stem}-{counter}.{suffix}" if dot and stem else f"{base}-{counter}"
                )
            files[rel] = decoded(item)
            paths.append(rel)
        params[name] = paths if spec.type == "file[]" else paths[0]
        names.append(name)
    return params, files, tuple(names)
