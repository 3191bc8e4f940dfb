"""Importing tools from a zip or a folder, for the import page and `manage.py import_tools`.

A zip comes from someone's machine, so it is read as hostile: nothing is extracted to disk,
every entry's path must be a safe relative path (no `../x`, no `/etc/x`, no drive letters
or backslashes), symbolic links, encrypted entries and duplicate names are refused, so are
names holding invisible formatting characters (bidi overrides such as U+202E, zero-width
marks: Unicode category Cf, which make one name read as another) and names that differ
only by case (one file on a case-insensitive disk; `check_names`, for folders too), and
sizes are bounded twice: by the sizes the zip declares (before anything is decompressed)
and by counting the bytes that actually come out (a zip may lie about its sizes), with a
cap on the compression ratio for zip bombs. Any refusal raises ZipRefused with a message a
person can act on; nothing is imported.

Then every tool is validated, and only if all are valid is anything written, in one
transaction: each tool whose content differs from its latest version becomes a new
version (a draft, or published on request). All or nothing, so a half-imported set of
tools never reaches the registry."""

from __future__ import annotations

import stat
import unicodedata
import zipfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from django.db import transaction

from tools_app.audit import Actor, record
from tools_app.catalog import bundle
from tools_app.catalog.versions import publish_version, save_version
from tools_app.http_tools.checks import ValidationContext
from tools_app.http_tools.context import validation_context
from tools_app.lib import strictyaml
from tools_app.manifest import toolmd
from tools_app.manifest.folder import validate_files
from tools_app.models import Tool
from tools_app.models.tools import VersionSource

MAX_FILES = 1000  # entries in one zip, folders not counted
MAX_UNPACKED_BYTES = 20 * 1024 * 1024  # all files, uncompressed
MAX_ZIP_BYTES = MAX_UNPACKED_BYTES  # the upload itself
# Text compresses about 3-10x; more than this on anything sizeable is a zip bomb.
MAX_RATIO = 100
RATIO_MIN_BYTES = 64 * 1024  # tiny files may compress absurdly well and harm nobody
CHUNK = 64 * 1024


class ZipRefused(ValueError):
    """The zip cannot be imported as it is; the message says why."""


@dataclass
class ToolImport:
    """One tool found in an import: its files, and its problems once validated."""

    folder: str
    files: dict[str, bytes]
    problems: list[strictyaml.Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not any(p.severity == strictyaml.ERROR for p in self.problems)


@dataclass(frozen=True)
class ImportLine:
    name: str
    status: str  # imported | updated | unchanged | invalid | skipped
    version: int | None = None
    detail: str = ""
    published: bool = False

    def __str__(self) -> str:
        text = f"{self.name}: {self.status}"
        if self.version is not None:
            text += f" v{self.version}"
        if self.published:
            text += ", published"
        return text + (f" ({self.detail})" if self.detail else "")


class ImportRefused(Exception):
    """Some tool is invalid: nothing was imported. `lines` says what was wrong with each."""

    def __init__(self, lines: list[ImportLine]) -> None:
        self.lines = lines
        bad = [line for line in lines if line.status == "invalid"]
        super().__init__(f"{len(bad)} invalid tool(s); nothing imported")


# --- Reading a zip ------------------------------------------------------------------------


def read_zip(source: str | Path | BinaryIO) -> list[ToolImport]:
    """The tool folders in a zip, read in memory under the limits above.

    Each top-level folder is a tool. A zip of one folder that holds tool folders (someone
    zipped their `tools/` folder) is read as those tools."""
    try:
        archive = zipfile.ZipFile(source)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError) as exc:
        raise ZipRefused(f"not a readable zip file ({exc})") from None
    with archive:
        entries = _checked_entries(archive)
        files = {info.filename: data for info, data in _read_entries(archive, entries)}
    return _group(files)


def _checked_entries(archive: zipfile.ZipFile) -> list[zipfile.ZipInfo]:
    """The file entries to read, after every check that needs no decompression."""
    infos = archive.infolist()
    files = [info for info in infos if not info.is_dir()]
    if len(files) > MAX_FILES:
        raise ZipRefused(f"the zip holds {len(files)} files; at most {MAX_FILES:,} are allowed")
    seen: set[str] = set()
    declared = 0
    entries = []
    for info in infos:
        name = info.filename
        shown = name.encode("utf-8", "backslashreplace").decode("ascii", "backslashreplace")
        try:
            bundle.safe_relpath(name.rstrip("/") if info.is_dir() else name)
        except bundle.BundleError as exc:
            raise ZipRefused(f"unsafe entry {shown!r}: {_reason(exc)}") from None
        if name in seen:
            raise ZipRefused(f"{shown}: appears twice in the zip")
        if (problem := name_problem(name)) is not None:
            raise ZipRefused(f"{_shown(name)}: {problem}")
        seen.add(name)
        if _is_symlink(info):
            raise ZipRefused(f"{shown}: symbolic links are not allowed")
        if info.is_dir() or _is_junk(name):
            continue
        # Unix modes may carry no file type at all (zipfile.writestr writes 0o600).
        kind = stat.S_IFMT(info.external_attr >> 16)
        if info.create_system == 3 and kind and kind != stat.S_IFREG:
            raise ZipRefused(f"{shown}: not a regular file")
        if info.flag_bits & 0x1:
            raise ZipRefused(f"{shown}: encrypted entries are not supported")
        declared += info.file_size
        if declared > MAX_UNPACKED_BYTES:
            raise ZipRefused(
                f"the zip unpacks to more than {_mib(MAX_UNPACKED_BYTES)} "
                f"(declared sizes); at most {_mib(MAX_UNPACKED_BYTES)} are allowed"
            )
        if info.file_size > RATIO_MIN_BYTES and info.file_size > MAX_RATIO * max(
            info.compress_size, 1
        ):
            raise ZipRefused(
                f"{shown}: compressed {info.file_size // max(info.compress_size, 1):,} to 1; "
                f"more than {MAX_RATIO} to 1 looks like a zip bomb"
            )
        entries.append(info)
    kept = [info.filename.rstrip("/") for info in infos if not _is_junk(info.filename)]
    if (problem := collision_problem(kept)) is not None:
        raise ZipRefused(problem)
    return entries


def name_problem(path: str) -> str | None:
    """Why `path` may not be a name in an import beyond bundle.safe_relpath's rules: an
    invisible formatting character (Unicode category Cf: bidi controls U+202A-U+202E and
    U+2066-U+2069, U+200E/U+200F, zero-width marks) lets `evil\u202egnp.sh` read as
    `evilhs.png` in every listing of the tool."""
    for char in path:
        if unicodedata.category(char) == "Cf":
            name = unicodedata.name(char, "a formatting character")
            return (
                f"names may not hold invisible formatting characters (U+{ord(char):04X} "
                f"{name}): they make a name read as another"
            )
    return None


def collision_problem(paths: Iterable[str]) -> str | None:
    """Two names (files or folders) that differ only by case or Unicode normalization:
    on a case-insensitive disk (macOS, Windows, a sync client's) they are one file, and
    which one wins depends on the order of writing."""
    seen: dict[str, str] = {}
    for path in paths:
        parts = path.split("/")
        for end in range(1, len(parts) + 1):
            prefix = "/".join(parts[:end])
            other = seen.setdefault(unicodedata.normalize("NFC", prefix).casefold(), prefix)
            if other != prefix:
                first, second = sorted((_shown(other), _shown(prefix)))
                return f"{first} and {second}: names that differ only by case are not allowed"
    return None


def _shown(name: str) -> str:
    """`name` in ASCII, each other character escaped (\\u202e): seen as it is."""
    return name.encode("ascii", "backslashreplace").decode("ascii")


def _read_entries(
    archive: zipfile.ZipFile, entries: list[zipfile.ZipInfo]
) -> list[tuple[zipfile.ZipInfo, bytes]]:
    """Decompress in chunks, counting what actually comes out: sizes in a zip can lie."""
    total = 0
    out = []
    for info in entries:
        limit = max(RATIO_MIN_BYTES, MAX_RATIO * max(info.compress_size, 1))
        chunks = []
        size = 0
        try:
            with archive.open(info) as member:
                while chunk := member.read(CHUNK):
                    size += len(chunk)
                    total += len(chunk)
                    if total > MAX_UNPACKED_BYTES:
                        raise ZipRefused(
                            f"the zip unpacks to more than {_mib(MAX_UNPACKED_BYTES)}; "
                            f"at most {_mib(MAX_UNPACKED_BYTES)} are allowed"
                        )
                    if size > limit:
                        raise ZipRefused(
                            f"{info.filename}: unpacks to more than {MAX_RATIO} times its "
                            "compressed size; that looks like a zip bomb"
                        )
                    chunks.append(chunk)
        except (zipfile.BadZipFile, RuntimeError, NotImplementedError, OSError, EOFError) as exc:
            # A CRC error here is also how zipfile reports a size the header lied about.
            raise ZipRefused(
                f"{info.filename}: cannot be read from the zip: its data does not match its "
                f"headers ({exc})"
            ) from None
        except ValueError as exc:  # zlib errors surface as zlib.error, a ValueError subclass
            raise ZipRefused(f"{info.filename}: damaged data in the zip ({exc})") from None
        out.append((info, b"".join(chunks)))
    return out


def _is_symlink(info: zipfile.ZipInfo) -> bool:
    return stat.S_ISLNK(info.external_attr >> 16)


def _is_junk(name: str) -> bool:
    parts = name.split("/")
    return parts[0] in bundle.ZIP_JUNK_FOLDERS or any(p in bundle.JUNK_NAMES for p in parts)


def _reason(exc: Exception) -> str:
    # safe_relpath's messages start with the path; the caller already shows it.
    return str(exc).split(": ", 1)[-1]


def _mib(size: int) -> str:
    return f"{size / (1024 * 1024):g} MiB"


def _group(files: Mapping[str, bytes]) -> list[ToolImport]:
    """{zip path: bytes} -> one ToolImport per top-level folder."""
    if "TOOL.md" in files:
        raise ZipRefused(
            "TOOL.md is at the top of the zip: put each tool in its own folder named "
            "after the tool (web_fetch/TOOL.md)"
        )
    folders: dict[str, dict[str, bytes]] = {}
    for path, data in files.items():
        head, _, rest = path.partition("/")
        if rest:
            folders.setdefault(head, {})[rest] = data
        # a README beside the tool folders is not part of any tool
    if not folders:
        raise ZipRefused("the zip holds no tool folders")
    # One folder without TOOL.md whose subfolders have one: a zipped folder of tools.
    if len(folders) == 1:
        inner = next(iter(folders.values()))
        if "TOOL.md" not in inner and any(
            p.count("/") == 1 and p.endswith("/TOOL.md") for p in inner
        ):
            return _group(inner)
    return [
        ToolImport(folder, dict(sorted(files.items()))) for folder, files in sorted(folders.items())
    ]


# --- Reading folders (import_tools DIR) ------------------------------------------------


def read_dir(path: Path) -> list[ToolImport]:
    """A tool folder, or a folder of tool folders (every subfolder is reported)."""
    path = Path(path)
    if (path / "TOOL.md").exists():
        folders = [path.resolve() if path.name in ("", ".", "..") else path]
    else:
        folders = sorted(
            p
            for p in path.iterdir()
            if p.is_dir() and not p.name.startswith(".") and p.name not in bundle.JUNK_NAMES
        )
    tools = []
    for folder in folders:
        try:
            tools.append(ToolImport(folder.name, bundle.read_tool_dir(folder)))
        except (bundle.BundleError, OSError) as exc:
            problem = strictyaml.Problem(f"{folder.name}/TOOL.md", 1, "files", str(exc))
            tools.append(ToolImport(folder.name, {}, [problem]))
    return tools


# --- Validating and importing -------------------------------------------------------------


def validate(tools: list[ToolImport], context: ValidationContext) -> list[ToolImport]:
    """Fill in every tool's problems (limits, TOOL.md, entry file, names)."""
    for tool in tools:
        if tool.problems:  # already validated, or unreadable
            continue
        label = f"{tool.folder}/TOOL.md"
        if not toolmd.NAME_RE.fullmatch(tool.folder):
            tool.problems.append(
                strictyaml.Problem(
                    label,
                    1,
                    "name",
                    f"folder {tool.folder!r} is not a valid tool name: lowercase letters, "
                    "digits and _, starting with a letter",
                )
            )
            continue
        try:
            bundle.check_files(tool.files)
        except bundle.BundleError as exc:
            tool.problems.append(strictyaml.Problem(label, 1, "files", str(exc)))
            continue
        # A zip's names were checked as it was read; a folder's are checked here.
        names = [
            f"{_shown(f'{tool.folder}/{p}')}: {m}" for p in tool.files if (m := name_problem(p))
        ]
        collision = collision_problem(f"{tool.folder}/{p}" for p in tool.files)
        if names or collision:
            for message in names or [collision]:
                tool.problems.append(strictyaml.Problem(label, 1, "files", message))
            continue
        tool.problems += validate_files(tool.files, tool.folder, context=context).problems
    return tools


def import_tools(
    tools: list[ToolImport],
    *,
    actor: Actor,
    publish: bool = False,
    origin: str = "",
) -> list[ImportLine]:
    """Import every tool or none: raises ImportRefused when any tool is invalid."""
    context = validation_context()  # read once for every tool
    validate(tools, context)
    if not tools:
        raise ImportRefused([])
    if not all(tool.ok for tool in tools):
        raise ImportRefused(_refused_lines(tools))
    note = f"imported from {origin}" if origin else "imported"
    lines: list[ImportLine] = []
    with transaction.atomic():
        existing = set(
            Tool.objects.filter(name__in=[t.folder for t in tools]).values_list("name", flat=True)
        )
        for tool in tools:
            saved = save_version(
                tool.folder,
                tool.files,
                actor=actor,
                source=VersionSource.IMPORT,
                note=note,
                publish=publish,
                context=context,
            )
            version = saved.version
            published = False
            if publish:
                if not saved.created and version.pk != version.tool.published_version_id:
                    publish_version(version, actor=actor, context=context)
                published = True
            if not saved.created:
                status = "unchanged"
            else:
                status = "updated" if tool.folder in existing else "imported"
            lines.append(ImportLine(tool.folder, status, version.number, published=published))
        record(
            actor,
            "tools.import",
            summary=f"{note}: " + ", ".join(str(line) for line in lines),
            data={"origin": origin, "publish": publish, "tools": [str(line) for line in lines]},
        )
    return lines


def _refused_lines(tools: list[ToolImport]) -> list[ImportLine]:
    lines = []
    for tool in tools:
        if tool.ok:
            lines.append(
                ImportLine(
                    tool.folder,
                    "skipped",
                    detail="valid, but nothing is imported while another tool is invalid",
                )
            )
        else:
            errors = [str(p) for p in tool.problems if p.severity == strictyaml.ERROR]
            lines.append(ImportLine(tool.folder, "invalid", detail="; ".join(errors)))
    return lines
